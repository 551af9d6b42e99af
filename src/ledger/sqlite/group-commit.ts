/**
 * Group commit for the SQLite ledger.
 *
 * With `synchronous=FULL` every COMMIT waits for an fsync, and the fsync, not the SQL,
 * is what a ledger operation costs: a few hundred to a few thousand single-operation
 * transactions a second, against tens of thousands of rows a second when they share
 * one. So the operations that arrive in the same turn of the event loop (a burst of
 * control requests read from one socket, the relay's marks, a submit) are run together
 * in ONE `BEGIN IMMEDIATE … COMMIT`, in the order they were called:
 *
 * - each write still runs inside a SAVEPOINT of its own, with its own guards: one that
 *   throws (a bad input, a guard that no longer holds) is rolled back alone and rejects
 *   alone, and the others commit;
 * - nobody is answered before the COMMIT that made their change durable has returned,
 *   so durability is exactly what it was: an answered write is on disk;
 * - a read runs at once, on what is committed: it sees every write that was answered
 *   before it was asked, and none that is still waiting for its COMMIT (such a write is
 *   concurrent with the read, and nobody has been told of it yet). Making reads wait
 *   behind the writes would cost each control request a second fsync wait, for an
 *   ordering no caller can observe without awaiting the write first;
 * - if the batch as a whole fails (the COMMIT fails, or a storage error — full disk, I/O
 *   error, busy, out of memory, corruption — which SQLite may answer by rolling back the
 *   whole transaction), nothing of the batch was written: every operation of it is then
 *   run again alone in its own transaction, exactly as without group commit, so each
 *   gets its own outcome and its own error.
 */
import type { SqliteDatabase } from './database.js';
import { sqliteCode } from './database.js';

interface Pending {
  body: () => unknown;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

/** Thrown inside the batch to abandon it whole (its operations then run one by one). */
class BatchAbandoned extends Error {}

/** SQLite errors after which the enclosing transaction may have been rolled back whole. */
function mayHaveLostTransaction(error: unknown): boolean {
  const code = sqliteCode(error);
  if (code === undefined) return false;
  return (
    code === 'SQLITE_FULL' ||
    code.startsWith('SQLITE_IOERR') ||
    code.startsWith('SQLITE_BUSY') ||
    code === 'SQLITE_NOMEM' ||
    code === 'SQLITE_CORRUPT' ||
    code === 'SQLITE_NOTADB'
  );
}

export class GroupCommitter {
  private queue: Pending[] = [];
  private scheduled: NodeJS.Immediate | undefined;

  constructor(
    private readonly db: SqliteDatabase,
    /** Called once per committed transaction. */
    private readonly committed: () => void,
    /** Most operations in one transaction; more wait for the next one. */
    private readonly maxBatch = 512,
  ) {}

  /** Runs `body` in a transaction shared with the other writes of this turn; resolves after its COMMIT. */
  write<T>(body: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ body, resolve: resolve, reject });
      this.scheduled ??= setImmediate(() => this.flushLater());
    });
  }

  /** Runs `body` at once, on what is committed. */
  read<T>(body: () => T): Promise<T> {
    try {
      return Promise.resolve(body());
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
  }

  /** Runs everything waiting, now (before the database is closed). */
  flush(): void {
    if (this.scheduled) clearImmediate(this.scheduled);
    this.scheduled = undefined;
    while (this.queue.length > 0) this.runBatch();
  }

  private flushLater(): void {
    this.scheduled = undefined;
    this.runBatch();
    if (this.queue.length > 0) this.scheduled = setImmediate(() => this.flushLater());
  }

  /** Takes up to maxBatch waiting operations and runs them in one transaction. */
  private runBatch(): void {
    const batch = this.queue.splice(0, this.maxBatch);
    const outcomes: Outcome[] = [];
    try {
      this.db
        .transaction(() => {
          for (const pending of batch) {
            try {
              // A nested better-sqlite3 transaction is a SAVEPOINT: on a throw it is rolled
              // back (ROLLBACK TO + RELEASE) and the enclosing transaction goes on.
              const value = this.db.transaction(pending.body)();
              outcomes.push({ ok: true, value });
            } catch (error) {
              if (!this.db.inTransaction || mayHaveLostTransaction(error)) throw new BatchAbandoned();
              outcomes.push({ ok: false, error });
            }
          }
        })
        .immediate();
    } catch {
      // Nothing of the batch was written: give every operation its own transaction.
      for (const pending of batch) this.runAlone(pending);
      return;
    }
    this.committed();
    batch.forEach((pending, i) => {
      const outcome = outcomes[i]!;
      if (outcome.ok) pending.resolve(outcome.value);
      else pending.reject(outcome.error);
    });
  }

  /** One write in its own transaction: how every write ran before group commit. */
  private runAlone(pending: Pending): void {
    try {
      const value = this.db.transaction(pending.body).immediate();
      this.committed();
      pending.resolve(value);
    } catch (error) {
      pending.reject(error);
    }
  }
}
