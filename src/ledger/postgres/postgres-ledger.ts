import type pg from 'pg';

import { type Clock, systemClock } from '../../core/clock.js';
import { LedgerError, LedgerErrorCode } from '../errors.js';
import { defaultLedgerConfig, type JobChangeFeed, type JobChangeListener, type Ledger, type LedgerConfig } from '../ledger.js';
import { runPlanAsync } from '../operations/plan.js';
import { PlannedLedger, type MakePlan } from '../operations/planned-ledger.js';
import { validateConfig } from '../shared/input-validation.js';
import { PgContext } from './context.js';
import {
  createPool,
  describeTarget,
  isConnectionFailure,
  isRetryable,
  isStaleConnection,
  type LedgerTarget,
  migrate,
  openError,
  operationError,
  validateSchema,
} from './database.js';
import { openPgJobChangeFeed, type PgJobChangeFeedOptions } from './job-change-feed.js';
import { PgStatements } from './statements.js';

export interface PostgresLedgerOptions {
  /** `postgres://user:password@host:port/database`; PG* environment variables fill the gaps, as in libpq. */
  connectionString: string;
  clock?: Clock;
  config?: Partial<LedgerConfig>;
  /** The schema holding the ledger's tables, created if missing (default `planrun`). */
  schema?: string;
  /** Connections in the pool (default 10). */
  poolSize?: number;
  /** How long to wait for a connection before the ledger counts as unavailable (default 10 s). */
  connectionTimeoutMs?: number;
  /** How long one statement may wait for the server's answer before its connection counts as lost (default 30 s). */
  queryTimeoutMs?: number;
  /** How long the job change feed waits before it reconnects after its connection dropped (default 1 s). */
  changeFeedRetryMs?: number;
}

export const defaultPostgresSchema = 'planrun';

/**
 * Tries of one operation that may safely run again: its transaction was rolled back on a
 * deadlock, or its pooled connection turned out dead (a server restart) before it did anything.
 */
const MAX_TRIES = 3;

/**
 * Opens the PostgreSQL ledger: connects, applies pending migrations (under an advisory
 * lock, so several orchestrators may start at once) and answers a Ledger. Throws a
 * LedgerError naming the server, database and schema (never the password) when it cannot.
 */
export async function openPostgresLedger(options: PostgresLedgerOptions): Promise<Ledger> {
  const config = validateConfig({ ...defaultLedgerConfig, ...options.config });
  const schema = validateSchema(options.schema ?? defaultPostgresSchema);
  const clock = options.clock ?? systemClock;
  let target: LedgerTarget;
  try {
    target = describeTarget(options.connectionString, schema);
  } catch (error) {
    throw new LedgerError(LedgerErrorCode.invalidInput, `the PostgreSQL connection string cannot be read: ${(error as Error).message}`, {
      cause: error,
    });
  }
  const pool = createPool({
    connectionString: options.connectionString,
    schema,
    poolSize: positive('poolSize', options.poolSize ?? 10),
    connectionTimeoutMs: positive('connectionTimeoutMs', options.connectionTimeoutMs ?? 10_000),
    queryTimeoutMs: positive('queryTimeoutMs', options.queryTimeoutMs ?? 30_000),
  });
  try {
    const client = await pool.connect();
    try {
      await migrate(client, schema, target, clock);
    } finally {
      client.release();
    }
  } catch (error) {
    await pool.end().catch(() => {});
    throw openError(target, error);
  }
  const feed: PgJobChangeFeedOptions = {
    connectionString: options.connectionString,
    schema,
    retryMs: positive('changeFeedRetryMs', options.changeFeedRetryMs ?? 1000),
    connectionTimeoutMs: positive('connectionTimeoutMs', options.connectionTimeoutMs ?? 10_000),
  };
  return new PostgresLedger(pool, target, clock, config, feed);
}

function positive(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 1) {
    throw new LedgerError(LedgerErrorCode.invalidInput, `PostgreSQL ledger option ${name} must be a positive integer, got ${value}`);
  }
  return value;
}

/**
 * The Ledger on PostgreSQL. Each write runs as one READ COMMITTED transaction on one pooled
 * connection, so its guards and its effects (job row, history, outbox) commit together or
 * not at all; each transition is one guarded UPDATE whose row count decides, which keeps
 * concurrent orchestrators on the same database correct. Reads are single statements.
 * The operations are the shared plans (operations/, PlannedLedger) over PostgreSQL's
 * statements (statements.ts), each statement awaited on the transaction's connection.
 */
class PostgresLedger extends PlannedLedger {
  private closed = false;
  private readonly readContext: PgContext;

  constructor(
    private readonly pool: pg.Pool,
    private readonly target: LedgerTarget,
    private readonly clock: Clock,
    private readonly config: LedgerConfig,
    private readonly feed: PgJobChangeFeedOptions,
  ) {
    super();
    this.readContext = new PgContext(pool, clock, config);
  }

  private checkOpen(operation: string): void {
    if (this.closed) throw new LedgerError(LedgerErrorCode.closed, `${operation}: the ledger is closed`);
  }

  private async transaction<T>(operation: string, body: (ctx: PgContext) => Promise<T>): Promise<T> {
    this.checkOpen(operation);
    for (let tries = 1; ; tries++) {
      let client: pg.PoolClient;
      try {
        client = await this.pool.connect();
      } catch (error) {
        throw operationError(this.target, operation, error, false);
      }
      let phase: 'begin' | 'body' | 'commit' = 'begin';
      try {
        await client.query('BEGIN');
        phase = 'body';
        const result = await body(new PgContext(client, this.clock, this.config));
        phase = 'commit';
        await client.query('COMMIT');
        client.release();
        return result;
      } catch (error) {
        await this.abandon(client, error, phase === 'commit');
        if (tries < MAX_TRIES && (isRetryable(error) || (phase === 'begin' && isStaleConnection(error)))) continue;
        throw operationError(this.target, operation, error, phase === 'commit');
      }
    }
  }

  /**
   * Rolls back a failed transaction. A connection that failed, or failed while committing
   * (its state is unknown), or cannot even roll back, is closed rather than reused; the
   * server rolls back whatever it had not committed when the connection goes.
   */
  private async abandon(client: pg.PoolClient, error: unknown, committing: boolean): Promise<void> {
    if (committing || isConnectionFailure(error)) {
      client.release(true);
      return;
    }
    try {
      await client.query('ROLLBACK');
      client.release();
    } catch (rollbackError) {
      client.release(rollbackError instanceof Error ? rollbackError : true);
    }
  }

  private async query<T>(operation: string, body: (ctx: PgContext) => Promise<T>): Promise<T> {
    this.checkOpen(operation);
    for (let tries = 1; ; tries++) {
      try {
        return await body(this.readContext);
      } catch (error) {
        if (tries < MAX_TRIES && isStaleConnection(error)) continue;
        throw operationError(this.target, operation, error, false);
      }
    }
  }

  protected write<T>(operation: string, make: MakePlan<T>): Promise<T> {
    return this.transaction(operation, this.body(make));
  }

  protected read<T>(operation: string, make: MakePlan<T>): Promise<T> {
    return this.query(operation, this.body(make));
  }

  /**
   * A body that runs an operation's plan to its end on `ctx`, awaiting each statement. The
   * plan is made afresh, and the ledger's time read, each time the body runs (a transaction
   * tried again runs it again).
   */
  private body<T>(make: MakePlan<T>): (ctx: PgContext) => Promise<T> {
    return (ctx) => runPlanAsync(make({ now: this.clock.now(), config: this.config }), new PgStatements(ctx));
  }

  override watchJobChanges(listener: JobChangeListener): Promise<JobChangeFeed> {
    this.checkOpen('watchJobChanges');
    return openPgJobChangeFeed(this.feed, listener);
  }

  override async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.pool.end();
  }
}
