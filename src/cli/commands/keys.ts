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
    .description('make a key for a tenant and print it, alone on the last line; it is shown this once and stored only hashed')
    .requiredOption('--tenant <name>', 'the tenant the key acts for (letters, digits, "-" and "_", starting with a letter)')
    .option('--data-dir <dir>', dataDirHelp, defaultDataDir)
    .action((flags: { tenant: string; dataDir: string }) => {
      const problem = tenantNameProblem(flags.tenant);
      if (problem) throw new UsageError(problem);
      const fresh = !existsSync(join(flags.dataDir, keysFile));
      withKeyStore(flags.dataDir, (store) => {
        const created = store.create(flags.tenant);
        // The notes go to stderr so stdout is the key alone: `KEY=$(planrun keys create ...)`.
        if (fresh) console.error(`made a new key store in ${flags.dataDir}: an orchestrator with --data-dir ${flags.dataDir} accepts this key`);
        console.error(`key ${created.id} for tenant ${created.tenant}; store it now, it is not shown again:`);
        console.log(created.key);
      });
    });

  keys
    .command('list')
    .description('list the keys: id, tenant, the first characters of the key, and when it was made')
    .option('--data-dir <dir>', dataDirHelp, defaultDataDir)
    .action((flags: { dataDir: string }) =>
      withExistingKeyStore(flags.dataDir, (store) => {
        const rows = store.list().map((key) => [key.id, key.tenant, `${key.prefix}...`, new Date(key.createdAt).toISOString()]);
        printTable([['ID', 'TENANT', 'KEY', 'CREATED'], ...rows]);
      }),
    );

  keys
    .command('revoke')
    .description('delete a key: requests bearing it are refused from then on')
    .argument('<id>', 'the key id, as `planrun keys list` shows it')
    .option('--data-dir <dir>', dataDirHelp, defaultDataDir)
    .action((id: string, flags: { dataDir: string }) =>
      withExistingKeyStore(flags.dataDir, (store) => {
        if (!store.revoke(id)) throw new UsageError(`no key has id ${id} (see planrun keys list)`);
        console.log(`revoked key ${id}`);
      }),
    );
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
