import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Command } from 'commander';
import { KeyStore } from '../../keys/key-store.js';
import { tenantNameProblem } from '../../keys/tenant-name.js';
import { requireData } from '../data-dir.js';
import { UsageError } from '../options.js';

const dataDirHelp = 'where the key store (keys.db) lives';
const defaultDataDir = './.planrun';
const keysFile = 'keys.db';

export function registerKeysCommand(program: Command): void {
  const keys = program.command('keys').description("manage the API keys: each one acts for one tenant and sees only that tenant's jobs");

  keys
    .command('create')
    .description('make a key and print it, alone on the last line; it is shown this once and stored only hashed')
    .option('--tenant <name>', 'the tenant the key acts for (letters, digits, "-" and "_", starting with a letter)')
    .option('--admin', "an admin key instead: it sees and acts on every tenant's jobs, and names the tenant when it submits")
    .option('--data-dir <dir>', dataDirHelp, defaultDataDir)
    .action((flags: { tenant?: string; admin?: boolean; dataDir: string }) => {
      if (flags.admin && flags.tenant !== undefined) throw new UsageError('--admin and --tenant exclude each other: an admin key acts for every tenant');
      if (!flags.admin && flags.tenant === undefined) throw new UsageError("required option '--tenant <name>' not specified (or --admin for an admin key)");
      const problem = flags.tenant === undefined ? undefined : tenantNameProblem(flags.tenant);
      if (problem) throw new UsageError(problem);
      const fresh = !existsSync(join(flags.dataDir, keysFile));
      withKeyStore(flags.dataDir, (store) => {
        const created = flags.tenant === undefined ? store.createAdmin() : store.create(flags.tenant);
        // The notes go to stderr so stdout is the key alone: `KEY=$(planrun keys create ...)`.
        if (fresh) console.error(`made a new key store in ${flags.dataDir}: an orchestrator with --data-dir ${flags.dataDir} accepts this key`);
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
    .option('--data-dir <dir>', dataDirHelp, defaultDataDir)
    .action((flags: { dataDir: string }) =>
      withExistingKeyStore(flags.dataDir, (store) => {
        const rows = store
          .list()
          .map((key) => [key.id, key.tenant ?? '*', key.kind, `${key.prefix}...`, time(key.createdAt), time(key.lastUsedAt), time(key.revokedAt)]);
        printTable([['ID', 'TENANT', 'KIND', 'KEY', 'CREATED', 'LAST USED', 'REVOKED'], ...rows]);
      }),
    );

  keys
    .command('revoke')
    .description('revoke a key: requests bearing it are refused from then on (open event streams too); it stays listed as revoked')
    .argument('<id>', 'the key id, as `planrun keys list` shows it')
    .option('--data-dir <dir>', dataDirHelp, defaultDataDir)
    .action((id: string, flags: { dataDir: string }) =>
      withExistingKeyStore(flags.dataDir, (store) => {
        const outcome = store.revoke(id);
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

/** Listing or revoking keys where there is no key store would make an empty one: refused instead. */
function withExistingKeyStore(dataDir: string, use: (store: KeyStore) => void): void {
  requireData(dataDir, keysFile);
  withKeyStore(dataDir, use);
}

function withKeyStore(dataDir: string, use: (store: KeyStore) => void): void {
  const store = KeyStore.open(dataDir);
  try {
    use(store);
  } finally {
    store.close();
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
