/**
 * The PostgreSQL side of the ledger: the connection pool (every connection pinned to the
 * ledger's schema), the start-up migrations, and the mapping of PostgreSQL failures to
 * typed LedgerErrors. Messages name the server and database (and schema) so an operator
 * knows what to fix, and never the password.
 */
import pg from 'pg';

import type { Clock } from '../../core/clock.js';
import { LedgerError, LedgerErrorCode } from '../errors.js';
import { migrations } from './migrations.js';

/** Where the ledger lives, as shown in messages: `postgres://user@host:port/database (schema s)`. */
export interface LedgerTarget {
  description: string;
  /** Removed from any message before it is shown. */
  password: string | undefined;
}

export interface PoolOptions {
  connectionString: string;
  schema: string;
  poolSize: number;
  connectionTimeoutMs: number;
  queryTimeoutMs: number;
}

/** A schema name we can put in a startup option and in DDL without quoting. */
const schemaName = /^[a-z_][a-z0-9_]{0,62}$/;

export function validateSchema(schema: string): string {
  if (typeof schema !== 'string' || !schemaName.test(schema)) {
    throw new LedgerError(
      LedgerErrorCode.invalidInput,
      `ledger schema must be a lower-case PostgreSQL identifier (letters, digits, _; at most 63), got ${JSON.stringify(schema)}`,
    );
  }
  return schema;
}

export function describeTarget(connectionString: string, schema: string): LedgerTarget {
  // pg's own parsing of the connection string (and PG* environment defaults), without connecting.
  const client = new pg.Client({ connectionString });
  const password = typeof client.password === 'string' && client.password.length > 0 ? client.password : undefined;
  return {
    description: `postgres://${client.user ? `${client.user}@` : ''}${client.host}:${client.port}/${client.database ?? ''} (schema ${schema})`,
    password,
  };
}

// int8 (bigint: times, ids, sequence numbers, counts) as JS numbers: epoch milliseconds and
// row counts stay far below 2^53. Per pool, so other users of `pg` in the process keep theirs.
const INT8_OID = 20;
const types: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID && format !== 'binary'
      ? (value: string) => Number(value)
      : (pg.types.getTypeParser(oid, format) as unknown)) as pg.CustomTypesConfig['getTypeParser'],
};

const IDLE_IN_TRANSACTION_TIMEOUT_MS = 60_000;

export function createPool(options: PoolOptions): pg.Pool {
  const pool = new pg.Pool({
    connectionString: options.connectionString,
    max: options.poolSize,
    connectionTimeoutMillis: options.connectionTimeoutMs,
    // A statement whose answer does not come (a cut network) fails the operation instead of
    // hanging it; the connection is then discarded (see PostgresLedger.abandon).
    query_timeout: options.queryTimeoutMs,
    keepAlive: true,
    // A transaction its client walked away from mid-way (a partition) must not hold its row
    // locks until TCP notices: ours take milliseconds between statements.
    idle_in_transaction_session_timeout: IDLE_IN_TRANSACTION_TIMEOUT_MS,
    application_name: 'planrun-ledger',
    types,
    // Every statement runs in the ledger's schema (a name validated above). Set per
    // connection rather than as a startup option, so that `options` in the connection
    // string (say `-c synchronous_commit=remote_apply`) still reach the server untouched.
    onConnect: async (client) => {
      await client.query(`SET search_path TO ${options.schema}`);
    },
  });
  // An idle connection that breaks (server restart, network cut) is dropped from the pool
  // and the next operation opens a new one; without a listener it would crash the process.
  pool.on('error', () => {});
  // The pool listens only to idle connections: one an operation holds, between two of its
  // statements, when the server ends it (a restart sends FATAL 57P01, then closes) would
  // emit 'error' with no listener and crash the process. The operation learns of it from
  // its next statement, which rejects, and discards the connection (PostgresLedger.abandon).
  pool.on('connect', (client) => client.on('error', () => {}));
  return pool;
}

const MIGRATION_LOCK_CLASS = 0x706c_616e; // 'plan'

/**
 * Applies every pending migration in one transaction. Several orchestrators may start at
 * once: a transaction-scoped advisory lock per schema lets one of them migrate while the
 * others wait and then find nothing to do. A schema recorded at a version this build does
 * not know is refused with `ledger_too_new`.
 */
export async function migrate(client: pg.PoolClient, schema: string, target: LedgerTarget, clock: Clock): Promise<void> {
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [MIGRATION_LOCK_CLASS, schema]);
    const exists = await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]);
    // Only created when missing: CREATE SCHEMA needs a privilege an existing ledger does not.
    if (exists.rowCount === 0) await client.query(`CREATE SCHEMA ${schema}`);
    await client.query(`SET LOCAL search_path TO ${schema}`);
    const table = await client.query<{ name: string | null }>(`SELECT to_regclass('schema_migrations') AS name`);
    if (table.rows[0]?.name === null) {
      const taken = await client.query<{ name: string }>(
        `SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = $1 AND c.relname = ANY($2::text[]) ORDER BY 1`,
        [schema, ['jobs', 'attempts', 'outbox']],
      );
      if (taken.rows.length > 0) {
        throw new LedgerError(
          LedgerErrorCode.corrupt,
          `${target.description} is not a planrun ledger: it has ${taken.rows.map((r) => r.name).join(', ')} but no schema_migrations; choose another schema`,
        );
      }
      await client.query('CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL)');
    }
    const applied = await client.query<{ version: number | null }>('SELECT MAX(version) AS version FROM schema_migrations');
    const current = applied.rows[0]?.version ?? 0;
    const latest = migrations[migrations.length - 1]?.version ?? 0;
    if (current > latest) {
      throw new LedgerError(
        LedgerErrorCode.tooNew,
        `ledger at ${target.description} is at schema version ${current}, newer than this planrun knows (${latest}); upgrade planrun`,
      );
    }
    for (const migration of migrations) {
      if (migration.version <= current) continue;
      await client.query(migration.sql);
      await client.query('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [migration.version, migration.name, clock.now()]);
    }
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  }
}

export function sqlState(error: unknown): string | undefined {
  if (typeof error === 'object' && error !== null && 'code' in error) {
    const code = error.code;
    return typeof code === 'string' ? code : undefined;
  }
  return undefined;
}

function detailOf(error: unknown, target: LedgerTarget): string {
  let detail =
    error instanceof AggregateError && error.errors.length > 0
      ? error.errors.map((e: unknown) => (e instanceof Error ? e.message : String(e))).join('; ')
      : error instanceof Error
        ? error.message
        : String(error);
  if (detail.length === 0) detail = sqlState(error) ?? 'unknown error';
  return target.password ? detail.split(target.password).join('***') : detail;
}

/** Errors that say the server cannot be reached or used right now (socket errors, SQLSTATE classes 08, 57P, 53300...). */
export function isConnectionFailure(error: unknown): boolean {
  const code = sqlState(error);
  if (code !== undefined) {
    if (/^E[A-Z]+$/.test(code)) return true; // ECONNREFUSED, ENOTFOUND, ETIMEDOUT, ECONNRESET, EPIPE...
    if (code.startsWith('08') || code.startsWith('57P') || code.startsWith('28') || code === '3D000') return true;
    if (code === '53300' || code === '57014' || code === '42501') return true;
  }
  if (error instanceof AggregateError) return error.errors.some(isConnectionFailure);
  const message = error instanceof Error ? error.message : '';
  return /Connection terminated|timeout exceeded when trying to connect|Query read timeout|Client has encountered a connection error|Connection ended|Client was closed/i.test(
    message,
  );
}

/** A failure to open the ledger: the server, the database, the schema or its version. */
export function openError(target: LedgerTarget, error: unknown): LedgerError {
  if (error instanceof LedgerError) return error;
  const detail = detailOf(error, target);
  const code = sqlState(error);
  if (code === 'XX001' || code === 'XX002') {
    return new LedgerError(LedgerErrorCode.corrupt, `ledger at ${target.description} is damaged (${detail})`, { cause: error });
  }
  return new LedgerError(LedgerErrorCode.unavailable, `cannot open the PostgreSQL ledger at ${target.description}: ${detail}`, {
    cause: error,
  });
}

/**
 * A pooled connection that the server or network already closed: the statement never ran,
 * and a fresh connection may well work. Timeouts are not stale connections: the server may
 * be unreachable, and trying again would only double the wait.
 */
export function isStaleConnection(error: unknown): boolean {
  const message = error instanceof Error ? error.message : '';
  if (/timeout/i.test(message)) return false;
  const code = sqlState(error);
  return (
    code === 'ECONNRESET' ||
    code === 'EPIPE' ||
    code === '57P01' ||
    /Connection terminated unexpectedly|Client has encountered a connection error|Connection ended|not queryable/i.test(message)
  );
}

/** Deadlocks and serialization failures: the transaction was rolled back and may simply be run again. */
export function isRetryable(error: unknown): boolean {
  const code = sqlState(error);
  return code === '40P01' || code === '40001';
}

/**
 * Turns a storage failure during an operation into a typed error. `committing` says the
 * failure came while COMMIT was in flight, when the server may have applied it after all.
 */
export function operationError(target: LedgerTarget, operation: string, error: unknown, committing: boolean): unknown {
  if (error instanceof LedgerError) return error;
  const code = sqlState(error);
  const detail = detailOf(error, target);
  const outcome = committing ? 'it may or may not have been applied' : 'nothing was changed';
  if (code === '53100') {
    return new LedgerError(LedgerErrorCode.full, `${operation} failed: the ledger at ${target.description} is out of disk (${detail}); nothing was changed`, {
      cause: error,
    });
  }
  if (code === 'XX001' || code === 'XX002') {
    return new LedgerError(LedgerErrorCode.corrupt, `${operation} failed: the ledger at ${target.description} is damaged (${detail})`, { cause: error });
  }
  if (code?.startsWith('22')) {
    // A value PostgreSQL cannot store (a NUL character in a text, a number out of range).
    return new LedgerError(LedgerErrorCode.invalidInput, `${operation}: the ledger cannot store a value given (${detail}); nothing was changed`, {
      cause: error,
    });
  }
  if (isConnectionFailure(error) || code?.startsWith('53') || code?.startsWith('58')) {
    return new LedgerError(LedgerErrorCode.unavailable, `${operation} failed: cannot use the ledger at ${target.description} (${detail}); ${outcome}`, {
      cause: error,
    });
  }
  return error;
}
