import { InvalidArgumentError, type Command } from 'commander';
import type { Ledger } from '../../ledger/ledger.js';
import { ledgerChoice, positiveIntOption, UsageError } from '../options.js';
import { openExistingLedger } from '../existing-ledger.js';

interface LedgerFlags {
  dataDir: string;
  ledger?: string;
}

interface TenantSetFlags extends LedgerFlags {
  weight?: number;
  maxRunning?: number | null;
  type?: string;
}

/** A running limit: a whole number of at least 0, or `none` to remove it. */
function maxRunningOption(value: string): number | null {
  if (value === 'none') return null;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError(`expected a whole number of at least 0, or none, got "${value}"`);
  return n;
}

function withLedgerOptions(command: Command): Command {
  return command
    .option('--ledger <sqlite|url>', 'the ledger: sqlite (in the data dir) or a postgres:// URL (or PLANRUN_LEDGER)')
    .option('--data-dir <dir>', 'where the SQLite ledger lives', './.planrun');
}

async function withLedger(flags: LedgerFlags, body: (ledger: Ledger) => Promise<void>): Promise<void> {
  const ledger = await openExistingLedger(ledgerChoice(flags.ledger).ledger, flags.dataDir);
  try {
    await body(ledger);
  } finally {
    await ledger.close();
  }
}

/**
 * `planrun tenants` and `planrun types`: the fair share's weights and the running limits,
 * written to the ledger, where every orchestrator's dispatcher reads them on its next pass.
 */
export function registerTenantsCommands(program: Command): void {
  const tenants = program.command('tenants').description("set the tenants' weights and running limits for fair dispatch (docs/dispatch.md)");
  withLedgerOptions(
    tenants
      .command('set <tenant>')
      .description("set a tenant's weight in the fair share and its running limit (with --type: its limit for that job type)")
      .option('--weight <n>', 'its share of a busy job type against the other tenants with waiting jobs (default 1)', positiveIntOption)
      .option('--max-running <n|none>', 'the most of its jobs with a live lease at once; none removes the limit', maxRunningOption)
      .option('--type <type>', '--max-running applies to this job type of the tenant only'),
  ).action(async (tenant: string, flags: TenantSetFlags) => {
    if (flags.weight === undefined && flags.maxRunning === undefined) throw new UsageError('planrun tenants set needs --weight or --max-running');
    if (flags.type !== undefined && flags.maxRunning === undefined) throw new UsageError('--type goes with --max-running (weights are per tenant)');
    await withLedger(flags, async (ledger) => {
      if (flags.weight !== undefined) await ledger.setTenantWeight({ tenant, weight: flags.weight });
      if (flags.maxRunning !== undefined)
        await ledger.setRunningLimit({ tenant, ...(flags.type === undefined ? {} : { type: flags.type }), maxRunning: flags.maxRunning });
      console.log(JSON.stringify(await ledger.dispatchState(), null, 2));
    });
  });
  withLedgerOptions(
    tenants.command('list').description('print the weights, the running limits, and the jobs queued and running per tenant and type, as JSON'),
  ).action((flags: LedgerFlags) => withLedger(flags, async (ledger) => console.log(JSON.stringify(await ledger.dispatchState(), null, 2))));

  const types = program.command('types').description('set running limits per job type for fair dispatch');
  withLedgerOptions(
    types
      .command('set <type>')
      .description("set a job type's running limit, over all tenants")
      .requiredOption('--max-running <n|none>', 'the most jobs of the type with a live lease at once; none removes the limit', maxRunningOption),
  ).action((type: string, flags: TenantSetFlags) =>
    withLedger(flags, async (ledger) => {
      await ledger.setRunningLimit({ type, maxRunning: flags.maxRunning ?? null });
      console.log(JSON.stringify(await ledger.dispatchState(), null, 2));
    }),
  );
}
