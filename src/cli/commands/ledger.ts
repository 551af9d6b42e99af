import type { Command } from 'commander';
import pg from 'pg';
import { defaultLedgerConfig, type Ledger } from '../../ledger/ledger.js';
import { describeLedger, openLedger } from '../../ledger/open-ledger.js';
import { defaultPostgresSchema } from '../../ledger/postgres/postgres-ledger.js';
import { requireData } from '../data-dir.js';
import { ledgerChoice, UsageError } from '../options.js';

interface StatsFlags {
  dataDir: string;
  ledger?: string;
}

export function registerLedgerCommand(program: Command): void {
  const ledger = program.command('ledger').description('inspect the ledger');
  ledger
    .command('stats')
    .description('open the ledger (applying any pending migration) and print jobs by state and the outbox backlog, as JSON')
    .option('--ledger <sqlite|url>', 'the ledger: sqlite (in the data dir) or a postgres:// URL (or PLANRUN_LEDGER)')
    .option('--data-dir <dir>', 'where the SQLite ledger lives', './.planrun')
    .action(async (flags: StatsFlags) => {
      const opened = await openExisting(ledgerChoice(flags.ledger).ledger, flags.dataDir);
      try {
        const counts = await opened.countJobsByState();
        const outbox = await opened.outboxStats();
        console.log(JSON.stringify({ jobs: counts, outbox }, null, 2));
      } finally {
        await opened.close();
      }
    });
}

/** The ledger an orchestrator made: one that is not there is refused, not created empty. */
export async function openExisting(choice: string | undefined, dataDir: string): Promise<Ledger> {
  if (choice === undefined || choice === 'sqlite') requireData(dataDir, 'ledger.db');
  else if (/^postgres(ql)?:\/\//.test(choice)) await requireSchema(choice);
  return openLedger(choice, dataDir, defaultLedgerConfig);
}

async function requireSchema(choice: string): Promise<void> {
  const url = new URL(choice);
  const schema = url.searchParams.get('schema') ?? defaultPostgresSchema;
  url.searchParams.delete('schema');
  const client = new pg.Client({ connectionString: url.toString(), connectionTimeoutMillis: 10_000 });
  let found: boolean;
  try {
    await client.connect();
    const { rowCount } = await client.query('SELECT 1 FROM information_schema.schemata WHERE schema_name = $1', [schema]);
    found = (rowCount ?? 0) > 0;
  } catch (error) {
    throw new UsageError(`cannot read the ledger ${describeLedger(choice, '.')}: ${(error as Error).message}`);
  } finally {
    await client.end().catch(() => undefined);
  }
  if (!found) throw new UsageError(`no planrun ledger in schema "${schema}" of ${describeLedger(choice, '.')} (check --ledger and its ?schema=)`);
}
