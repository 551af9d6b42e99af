import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { LedgerError, LedgerErrorCode } from '../errors.js';
import { migrations } from './migrations.js';

export type SqliteDatabase = Database.Database;

/**
 * Opens (creating if needed) the ledger database at `path`, with the durability settings
 * planrun promises: WAL, `synchronous=FULL` (a commit is on disk before it is answered),
 * a busy timeout for a second process, and every pending migration applied.
 * Any failure names the file, so an operator knows what to fix.
 */
export function openLedgerDatabase(path: string, options: { busyTimeoutMs?: number } = {}): SqliteDatabase {
  const file = resolve(path);
  let db: SqliteDatabase | undefined;
  try {
    mkdirSync(dirname(file), { recursive: true });
    db = new Database(file);
    db.pragma(`busy_timeout = ${options.busyTimeoutMs ?? 5000}`);
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.pragma('foreign_keys = ON');
    migrate(db, file);
    return db;
  } catch (error) {
    db?.close();
    throw openError(file, error);
  }
}

function migrate(db: SqliteDatabase, file: string): void {
  db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`);
  const applied = db.prepare('SELECT MAX(version) AS version FROM schema_migrations').get() as { version: number | null };
  const current = applied.version ?? 0;
  const latest = migrations[migrations.length - 1]?.version ?? 0;
  if (current > latest) {
    throw new LedgerError(
      LedgerErrorCode.tooNew,
      `ledger database ${file} is at schema version ${current}, newer than this planrun knows (${latest}); upgrade planrun`,
    );
  }
  const record = db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)');
  for (const migration of migrations) {
    if (migration.version <= current) continue;
    db.transaction(() => {
      db.exec(migration.sql);
      record.run(migration.version, migration.name, Date.now());
    }).immediate();
  }
}

function openError(file: string, error: unknown): LedgerError {
  if (error instanceof LedgerError) return error;
  const code = sqliteCode(error);
  const detail = error instanceof Error ? error.message : String(error);
  if (code === 'SQLITE_NOTADB' || code === 'SQLITE_CORRUPT') {
    return new LedgerError(LedgerErrorCode.corrupt, `ledger database ${file} is not a planrun ledger or is damaged (${detail})`, {
      cause: error,
    });
  }
  return new LedgerError(LedgerErrorCode.unavailable, `cannot open ledger database ${file}: ${detail}`, { cause: error });
}

export function sqliteCode(error: unknown): string | undefined {
  if (typeof error === 'object' && error !== null && 'code' in error) {
    const code = error.code;
    return typeof code === 'string' ? code : undefined;
  }
  return undefined;
}

/** Turns a storage failure during an operation into a typed error; the transaction was rolled back. */
export function operationError(file: string, operation: string, error: unknown): unknown {
  if (error instanceof LedgerError) return error;
  const code = sqliteCode(error);
  const detail = error instanceof Error ? error.message : String(error);
  if (code === 'SQLITE_FULL') {
    return new LedgerError(LedgerErrorCode.full, `${operation} failed: ledger database ${file} is full (${detail}); nothing was changed`, {
      cause: error,
    });
  }
  if (code === 'SQLITE_CORRUPT' || code === 'SQLITE_NOTADB') {
    return new LedgerError(LedgerErrorCode.corrupt, `${operation} failed: ledger database ${file} is damaged (${detail})`, { cause: error });
  }
  if (code?.startsWith('SQLITE_IOERR') || code === 'SQLITE_READONLY' || code === 'SQLITE_CANTOPEN') {
    return new LedgerError(LedgerErrorCode.unavailable, `${operation} failed: cannot write ledger database ${file} (${detail}); nothing was changed`, {
      cause: error,
    });
  }
  return error;
}
