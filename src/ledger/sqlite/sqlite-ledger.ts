import { type Clock, systemClock } from '../../core/clock.js';
import { LedgerError, LedgerErrorCode } from '../errors.js';
import {
  defaultLedgerConfig,
  type CancelParams,
  type Ledger,
  type LedgerConfig,
  type GrantLeaseParams,
  type LeaseRef,
  type ListJobsParams,
  type RecordProgressParams,
  type OutboxSetAside,
  type RejectParams,
  type ReleaseParams,
  type RenewLeasesParams,
  type SettleParams,
  type SubmitParams,
  type SweepParams,
} from '../ledger.js';
import { cancel } from '../operations/cancel.js';
import { checkLease } from '../operations/check-lease.js';
import { grantLease } from '../operations/grant-lease.js';
import { outboxMarkSent, outboxStats, outboxTake } from '../operations/outbox.js';
import { runPlan, type OperationEnv, type Plan } from '../operations/plan.js';
import { countJobsByState, getAttempts, getJob, listJobs } from '../operations/queries.js';
import { recordProgress } from '../operations/record-progress.js';
import { reject } from '../operations/reject.js';
import { release } from '../operations/release.js';
import { renewLeases } from '../operations/renew-leases.js';
import { outboxSetAside } from '../operations/set-aside.js';
import { settle } from '../operations/settle.js';
import { submit, submitMany } from '../operations/submit.js';
import { sweep } from '../operations/sweep.js';
import { validateConfig } from '../shared/input-validation.js';
import { SqliteContext } from './context.js';
import { openLedgerDatabase, operationError, type SqliteDatabase } from './database.js';
import { GroupCommitter } from './group-commit.js';
import { SqliteStatements } from './statements.js';

export interface SqliteLedgerOptions {
  /** The database file; its folder is created if missing. */
  path: string;
  clock?: Clock;
  config?: Partial<LedgerConfig>;
  busyTimeoutMs?: number;
}

/** Opens the SQLite ledger; throws a LedgerError naming the file when it cannot. */
export async function openSqliteLedger(options: SqliteLedgerOptions): Promise<Ledger> {
  const config = validateConfig({ ...defaultLedgerConfig, ...options.config });
  const db = openLedgerDatabase(options.path, options.busyTimeoutMs === undefined ? {} : { busyTimeoutMs: options.busyTimeoutMs });
  return new SqliteLedger(db, options.path, new SqliteContext(db, options.clock ?? systemClock, config));
}

/** What a SQLite ledger counts about itself, for benchmarks and tests. */
export interface SqliteLedgerStats {
  /** Transactions committed (each one fsync with synchronous=FULL). */
  transactions: number;
}

const statsOf = new WeakMap<Ledger, SqliteLedgerStats>();

/** The counts of a ledger opened by openSqliteLedger; undefined for any other ledger. */
export function sqliteLedgerStats(ledger: Ledger): Readonly<SqliteLedgerStats> | undefined {
  return statsOf.get(ledger);
}

/**
 * The Ledger on better-sqlite3. Each write runs in a SAVEPOINT of its own inside a
 * BEGIN IMMEDIATE transaction shared with the other writes of the same event-loop turn
 * (group commit, group-commit.ts), so its guards and its effects (job row, history,
 * outbox) commit together or not at all, and it is answered only once committed.
 */
class SqliteLedger implements Ledger {
  private closed = false;
  private readonly stats: SqliteLedgerStats = { transactions: 0 };
  /** Writes of one event-loop turn share one transaction (one fsync); see group-commit.ts. */
  private readonly committer: GroupCommitter;
  private readonly statements: SqliteStatements;

  constructor(
    private readonly db: SqliteDatabase,
    private readonly file: string,
    private readonly ctx: SqliteContext,
  ) {
    statsOf.set(this, this.stats);
    this.committer = new GroupCommitter(db, () => this.stats.transactions++);
    this.statements = new SqliteStatements(ctx);
  }

  /**
   * A body that runs a shared operation's plan (operations/plan.ts) to its end, at once:
   * the plan is made afresh, and the ledger's time read, each time the body runs.
   */
  private plan<T>(make: (env: OperationEnv) => Plan<T>): () => T {
    return () => runPlan(make({ now: this.ctx.clock.now(), config: this.ctx.config }), this.statements);
  }

  private write<T>(operation: string, body: () => T): Promise<T> {
    return this.run(operation, () => this.committer.write(body));
  }

  private read<T>(operation: string, body: () => T): Promise<T> {
    return this.run(operation, () => this.committer.read(body));
  }

  private async run<T>(operation: string, body: () => Promise<T>): Promise<T> {
    if (this.closed) throw new LedgerError(LedgerErrorCode.closed, `${operation}: the ledger is closed`);
    try {
      return await body();
    } catch (error) {
      throw operationError(this.file, operation, error);
    }
  }

  submit(params: SubmitParams) {
    return this.write('submit', this.plan((env) => submit(params, env)));
  }
  submitMany(params: SubmitParams[]) {
    return this.write('submitMany', this.plan((env) => submitMany(params, env)));
  }
  grantLease(params: GrantLeaseParams) {
    return this.write('grantLease', this.plan((env) => grantLease(params, env)));
  }
  renewLeases(params: RenewLeasesParams) {
    return this.write('renewLeases', this.plan((env) => renewLeases(params, env)));
  }
  checkLease(params: LeaseRef) {
    return this.read('checkLease', this.plan((env) => checkLease(params, env)));
  }
  recordProgress(params: RecordProgressParams) {
    return this.write('recordProgress', this.plan((env) => recordProgress(params, env)));
  }
  settle(params: SettleParams) {
    return this.write('settle', this.plan((env) => settle(params, env)));
  }
  release(params: ReleaseParams) {
    return this.write('release', this.plan((env) => release(params, env)));
  }
  cancel(params: CancelParams) {
    return this.write('cancel', this.plan((env) => cancel(params, env)));
  }
  reject(params: RejectParams) {
    return this.write('reject', this.plan((env) => reject(params, env)));
  }
  sweep(params?: SweepParams) {
    return this.write('sweep', this.plan((env) => sweep(params, env)));
  }
  outboxTake(limit: number) {
    return this.read('outboxTake', this.plan((env) => outboxTake(limit, env)));
  }
  outboxMarkSent(ids: readonly number[]) {
    return this.write('outboxMarkSent', this.plan((env) => outboxMarkSent(ids, env)));
  }
  outboxSetAside(rows: readonly OutboxSetAside[]) {
    return this.write('outboxSetAside', this.plan((env) => outboxSetAside(rows, env)));
  }
  outboxStats() {
    return this.read('outboxStats', this.plan((env) => outboxStats(env)));
  }
  getJob(jobId: string, tenant?: string) {
    return this.read('getJob', this.plan(() => getJob(jobId, tenant)));
  }
  getAttempts(jobId: string) {
    return this.read('getAttempts', this.plan(() => getAttempts(jobId)));
  }
  listJobs(params: ListJobsParams) {
    return this.read('listJobs', this.plan(() => listJobs(params)));
  }
  countJobsByState() {
    return this.read('countJobsByState', this.plan(() => countJobsByState()));
  }
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // Operations already asked for are answered (run now), not dropped.
    this.committer.flush();
    this.db.close();
  }
}
