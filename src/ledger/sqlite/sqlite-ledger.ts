import { type Clock, systemClock } from '../../core/clock.js';
import { LedgerError, LedgerErrorCode } from '../errors.js';
import { defaultLedgerConfig, type JobChangeFeed, type Ledger, type LedgerConfig } from '../ledger.js';
import { runPlan } from '../operations/plan.js';
import { PlannedLedger, type MakePlan } from '../operations/planned-ledger.js';
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
 * outbox) commit together or not at all, and it is answered only once committed. The
 * operations are the shared plans (operations/, PlannedLedger) over SQLite's statements
 * (statements.ts), run synchronously inside that SAVEPOINT.
 */
class SqliteLedger extends PlannedLedger {
  readonly writesOfATurnCommitTogether = true;
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
    super();
    statsOf.set(this, this.stats);
    this.committer = new GroupCommitter(db, () => this.stats.transactions++);
    this.statements = new SqliteStatements(ctx);
  }

  protected write<T>(operation: string, make: MakePlan<T>): Promise<T> {
    return this.run(operation, () => this.committer.write(this.body(make)));
  }

  protected read<T>(operation: string, make: MakePlan<T>): Promise<T> {
    return this.run(operation, () => this.committer.read(this.body(make)));
  }

  /**
   * A body that runs an operation's plan to its end, at once (synchronously: a group
   * commit's SAVEPOINT never waits). The plan is made afresh, and the ledger's time read,
   * each time the body runs (a batch given up is run again write by write).
   */
  private body<T>(make: MakePlan<T>): () => T {
    return () => runPlan(make({ now: this.ctx.clock.now(), config: this.ctx.config }), this.statements);
  }

  private async run<T>(operation: string, body: () => Promise<T>): Promise<T> {
    if (this.closed) throw new LedgerError(LedgerErrorCode.closed, `${operation}: the ledger is closed`);
    try {
      return await body();
    } catch (error) {
      throw operationError(this.file, operation, error);
    }
  }

  /** One process writes a SQLite ledger, and its orchestrator tells its own listeners of its changes. */
  override watchJobChanges(): Promise<JobChangeFeed> {
    return Promise.resolve({ close: () => Promise.resolve() });
  }

  override async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // Operations already asked for are answered (run now), not dropped.
    this.committer.flush();
    this.db.close();
  }
}
