/**
 * The outbox: messages written in the same transaction as the ledger change they
 * announce, published later by the relay, and marked sent only after the broker
 * confirmed them.
 *
 *   enqueueWork(job, availableAt)   -> a work message for the job's current attempt
 *   enqueueResult(job)              -> the one result-or-failure message of a terminal job
 *                                      (a unique index refuses a second one)
 *   outboxTake(limit)               -> due unsent rows, oldest first
 *   outboxMarkSent(ids)             -> those rows are never taken again
 */
import type { OutboxMessage, OutboxStats, ResultMessage, WorkMessage } from '../../ledger.js';
import { resultMessage, workMessage } from '../../shared/outbox-messages.js';
import type { SqliteContext } from '../context.js';
import { type JobRow, toJob } from '../rows.js';

const insertRow = `INSERT INTO outbox (kind, job_id, body, created_at, available_at) VALUES (?, ?, ?, ?, ?)`;

export function enqueueWork(ctx: SqliteContext, job: Pick<JobRow, 'id' | 'attempt' | 'tenant' | 'type'>, availableAt: number): void {
  const body = workMessage(job);
  ctx.sql(insertRow).run('work', job.id, JSON.stringify(body), ctx.clock.now(), availableAt);
}

export function enqueueResult(ctx: SqliteContext, row: JobRow): void {
  const body = resultMessage(toJob(row));
  const now = ctx.clock.now();
  ctx.sql(insertRow).run('result', row.id, JSON.stringify(body), now, now);
}

interface OutboxRow {
  id: number;
  kind: 'work' | 'result';
  job_id: string;
  body: string;
  created_at: number;
  available_at: number;
}

// Walks the unsent rows in id order and skips the few not yet due (backoffs), so the
// cost is the rows returned plus the backoffs ahead of them, never a sort of the backlog.
const takeDue = `SELECT id, kind, job_id, body, created_at, available_at FROM outbox
  WHERE sent_at IS NULL AND available_at <= ? ORDER BY id LIMIT ?`;

export function outboxTake(ctx: SqliteContext, limit: number): OutboxMessage[] {
  const rows = ctx.sql(takeDue).all(ctx.clock.now(), limit) as OutboxRow[];
  return rows.map(
    (row) =>
      ({
        id: row.id,
        kind: row.kind,
        jobId: row.job_id,
        createdAt: row.created_at,
        availableAt: row.available_at,
        body: JSON.parse(row.body) as WorkMessage | ResultMessage,
      }) as OutboxMessage,
  );
}

const markSent = 'UPDATE outbox SET sent_at = ? WHERE id = ? AND sent_at IS NULL';

export function outboxMarkSent(ctx: SqliteContext, ids: readonly number[]): void {
  const now = ctx.clock.now();
  const statement = ctx.sql(markSent);
  for (const id of ids) statement.run(now, id);
}

const stats = `SELECT COUNT(*) AS unsent, MIN(created_at) AS oldest FROM outbox WHERE sent_at IS NULL AND available_at <= ?`;

export function outboxStats(ctx: SqliteContext): OutboxStats {
  const row = ctx.sql(stats).get(ctx.clock.now()) as { unsent: number; oldest: number | null };
  return { unsent: row.unsent, oldestCreatedAt: row.oldest };
}
