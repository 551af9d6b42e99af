import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Command } from 'commander';
import { importKeyFile, keyFileName } from '../../keys/key-file-import.js';
import { KeyStore } from '../../keys/key-store.js';
import { tenantNameProblem } from '../../keys/tenant-name.js';
import { defaultLedgerConfig, type Ledger } from '../../ledger/ledger.js';
import { openLedger } from '../../ledger/open-ledger.js';
import { ledgerFile, openExistingLedger } from '../existing-ledger.js';
import { ledgerChoice, UsageError } from '../options.js';

const ledgerHelp = 'the ledger that keeps the keys: sqlite (in the data dir) or a postgres:// URL (or PLANRUN_LEDGER); every orchestrator on it accepts them';
const dataDirHelp = 'where the SQLite ledger lives';
const defaultDataDir = './.planrun';

interface LedgerFlags {
  dataDir: string;
  ledger?: string;
}

export function registerKeysCommand(program: Command): void {
  const keys = program.command('keys').description("manage the API keys: each one acts for one tenant and sees only that tenant's jobs");

  keys
    .command('create')
    .description('make a key and print it, alone on the last line; it is shown this once and stored only hashed')
    .option('--tenant <name>', 'the tenant the key acts for (letters, digits, "-" and "_", starting with a letter)')
    .option('--admin', "an admin key instead: it sees and acts on every tenant's jobs, and names the tenant when it submits")
    .option('--ledger <sqlite|url>', ledgerHelp)
    .option('--data-dir <dir>', dataDirHelp, defaultDataDir)
    .action(async (flags: LedgerFlags & { tenant?: string; admin?: boolean }) => {
      if (flags.admin && flags.tenant !== undefined) throw new UsageError('--admin and --tenant exclude each other: an admin key acts for every tenant');
      if (!flags.admin && flags.tenant === undefined) throw new UsageError("required option '--tenant <name>' not specified (or --admin for an admin key)");
      const problem = flags.tenant === undefined ? undefined : tenantNameProblem(flags.tenant);
      if (problem) throw new UsageError(problem);
      const choice = ledgerChoice(flags.ledger).ledger;
      const sqlite = choice === undefined || choice === 'sqlite';
      const fresh = sqlite && ![ledgerFile, keyFileName].some((file) => existsSync(join(flags.dataDir, file)));
      await withKeyStore(await openLedger(choice, flags.dataDir, defaultLedgerConfig), flags.dataDir, async (store) => {
        const created = flags.tenant === undefined ? await store.createAdmin() : await store.create(flags.tenant);
        // The notes go to stderr so stdout is the key alone: `KEY=$(planrun keys create ...)`.
        if (fresh) console.error(`made a new ledger in ${flags.dataDir}: an orchestrator with --data-dir ${flags.dataDir} accepts this key`);
        const actsFor = created.tenant === undefined ? "admin key, for every tenant's jobs" : `for tenant ${created.tenant}`;
        console.error(`key ${created.id} ${actsFor}; store it now, it is not shown again:`);
        console.log(created.key);
      });
    });

  keys
    .command('list')
    .description(
      'list the keys (never the secret): id, tenant ("*" for an admin key), kind, the first characters of the key, when it was made, last used and revoked',
    )
    .option('--ledger <sqlite|url>', ledgerHelp)
    .option('--data-dir <dir>', dataDirHelp, defaultDataDir)
    .action(async (flags: LedgerFlags) =>
      withExistingKeyStore(flags, async (store) => {
        const rows = (await store.list()).map((key) => [
          key.id,
          key.tenant ?? '*',
          key.kind,
          `${key.prefix}...`,
          time(key.createdAt),
          time(key.lastUsedAt),
          time(key.revokedAt),
        ]);
        printTable([['ID', 'TENANT', 'KIND', 'KEY', 'CREATED', 'LAST USED', 'REVOKED'], ...rows]);
      }),
    );

  keys
    .command('revoke')
    .description(
      'revoke a key: requests bearing it are refused from then on by every orchestrator on the ledger (open event streams too); it stays listed as revoked',
    )
    .argument('<id>', 'the key id, as `planrun keys list` shows it')
    .option('--ledger <sqlite|url>', ledgerHelp)
    .option('--data-dir <dir>', dataDirHelp, defaultDataDir)
    .action(async (id: string, flags: LedgerFlags) =>
      withExistingKeyStore(flags, async (store) => {
        const outcome = await store.revoke(id);
        if (outcome === 'unknown') throw new UsageError(`no key has id ${id} (see planrun keys list)`);
        if (outcome === 'already_revoked') throw new UsageError(`key ${id} is already revoked`);
        console.log(`revoked key ${id}`);
      }),
    );
}

/** A time for the table: ISO 8601, or "-" for none. */
function time(ms: number | undefined): string {
  return ms === undefined ? '-' : new Date(ms).toISOString();
}

/** Listing or revoking keys where there is no ledger (nor a key file of an older planrun) would make an empty one: refused instead. */
async function withExistingKeyStore(flags: LedgerFlags, use: (store: KeyStore) => Promise<void>): Promise<void> {
  const ledger = await openExistingLedger(ledgerChoice(flags.ledger).ledger, flags.dataDir, [ledgerFile, keyFileName]);
  await withKeyStore(ledger, flags.dataDir, use);
}

/** Uses the keys of `ledger`, once the data dir's key file of an older planrun, if any, is imported into it; closes the ledger after. */
async function withKeyStore(ledger: Ledger, dataDir: string, use: (store: KeyStore) => Promise<void>): Promise<void> {
  try {
    await importKeyFile(ledger, dataDir);
    await use(new KeyStore(ledger));
  } finally {
    await ledger.close();
  }
}

function printTable(rows: string[][]): void {
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  for (const row of rows)
    console.log(
      row
        .map((cell, column) => cell.padEnd(widths[column]!))
        .join('  ')
        .trimEnd(),
    );
}
