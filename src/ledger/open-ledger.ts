import { join } from 'node:path';
import { LedgerError, LedgerErrorCode } from './errors.js';
import type { Ledger, LedgerConfig } from './ledger.js';
import { openPostgresLedger } from './postgres/postgres-ledger.js';
import { openSqliteLedger } from './sqlite/sqlite-ledger.js';

/**
 * Opens the ledger an operator chose: `sqlite` (the default: `<data-dir>/ledger.db`) or a
 * `postgres://` / `postgresql://` URL, which several orchestrators may share. A `schema`
 * query parameter in the URL names the schema of the ledger's tables (default `planrun`).
 */
export async function openLedger(choice: string | undefined, dataDir: string, config: LedgerConfig): Promise<Ledger> {
  if (choice === undefined || choice === 'sqlite') return openSqliteLedger({ path: join(dataDir, 'ledger.db'), config });
  if (/^postgres(ql)?:\/\//.test(choice)) {
    const url = new URL(choice);
    const schema = url.searchParams.get('schema');
    url.searchParams.delete('schema');
    return openPostgresLedger({ connectionString: url.toString(), config, ...(schema ? { schema } : {}) });
  }
  throw new LedgerError(LedgerErrorCode.invalidInput, `--ledger must be "sqlite" or a postgres:// URL, got "${choice}"`);
}

/** Where the ledger is, for a log line or a banner: the password never shown. */
export function describeLedger(choice: string | undefined, dataDir: string): string {
  if (choice === undefined || choice === 'sqlite') return `SQLite ${join(dataDir, 'ledger.db')}`;
  try {
    const url = new URL(choice);
    if (url.password) url.password = '***';
    return `PostgreSQL ${url.toString()}`;
  } catch {
    return 'PostgreSQL (an unreadable URL)';
  }
}
