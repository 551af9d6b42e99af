import { existsSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { defaultLedgerConfig, type Ledger } from '../ledger/ledger.js';
import { describeLedger, openLedger } from '../ledger/open-ledger.js';
import { defaultPostgresSchema } from '../ledger/postgres/postgres-ledger.js';
import { requireData } from './data-dir.js';
import { UsageError } from './options.js';

/** The SQLite ledger's file in the data dir. */
export const ledgerFile = 'ledger.db';

/**
 * The ledger an orchestrator made: one that is not there is refused, not created empty. A
 * SQLite ledger counts as there when its data dir holds any of `sqliteFiles` (the ledger's
 * file, by default).
 */
export async function openExistingLedger(choice: string | undefined, dataDir: string, sqliteFiles: readonly string[] = [ledgerFile]): Promise<Ledger> {
  if (choice === undefined || choice === 'sqlite') {
    if (!sqliteFiles.some((file) => existsSync(join(dataDir, file)))) requireData(dataDir, ledgerFile);
  } else if (/^postgres(ql)?:\/\//.test(choice)) await requireSchema(choice);
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
