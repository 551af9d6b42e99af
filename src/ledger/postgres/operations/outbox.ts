/**
 * The outbox: messages written in the same transaction as the ledger change they
 * announce, published later by the relay, and marked sent only after the broker
 * confirmed them.
 *
 *   enqueueWork(job, availableAt)   -> a work message for the job's current attempt
 *   enqueueResult(job)              -> the one result-or-failure message of a terminal job
 *                                      (a unique index refuses a second one)
 *   outboxTake(limit)               -> due unsent rows, oldest first; takes no lock and marks
 *                                      nothing, so a take that is never marked comes back
 *   outboxMarkSent(ids)             -> those rows are never taken again (one statement)
 *   outboxStats()                   -> how many due rows wait, and since when
 */
import type { OutboxMessage, OutboxStats, ResultMessage, WorkMessage } from '../../ledger.js';
import { resultMessage, workMessage } from '../../shared/outbox-messages.js';
import type { PgContext } from '../context.js';
import { type JobRow, toJob } from '../rows.js';

const insertRow = 'INSERT INTO outbox (kind, job_id, body, created_at, available_at) VALUES ($1, $2, $3, $4, $5)';

export async function enqueueWork(ctx: PgContext, job: JobRow, now: number, availableAt: number): Promise<void> {
  const body = workMessage(job);
  await ctx.run(insertRow, ['work', job.id, JSON.stringify(body), now, availableAt]);
}

export async function enqueueResult(ctx: PgContext, row: JobRow, now: number): Promise<void> {
  const body = resultMessage(toJob(row));
  await ctx.run(insertRow, ['result', row.id, JSON.stringify(body), now, now]);
}

interface OutboxRow {
  id: number;
  kind: 'work' | 'result';
  job_id: string;
  body: WorkMessage | ResultMessage;
  created_at: number;
  available_at: number;
}

// Walks the unsent rows in id order (a partial index) and skips the few not yet due
// (backoffs), so the cost is the rows returned plus the backoffs ahead of them.
const takeDue = `SELECT id, kind, job_id, body, created_at, available_at FROM outbox
  WHERE sent_at IS NULL AND available_at <= $1 ORDER BY id LIMIT $2`;

export async function outboxTake(ctx: PgContext, limit: number): Promise<OutboxMessage[]> {
  const rows = await ctx.rows<OutboxRow>(takeDue, [ctx.clock.now(), limit]);
  return rows.map(
    (row) =>
      ({
        id: row.id,
        kind: row.kind,
        jobId: row.job_id,
        createdAt: row.created_at,
        availableAt: row.available_at,
        body: row.body,
      }) as OutboxMessage,
  );
}

const markSent = 'UPDATE outbox SET sent_at = $1 WHERE id = ANY($2::bigint[]) AND sent_at IS NULL';

export async function outboxMarkSent(ctx: PgContext, ids: readonly number[]): Promise<void> {
  if (ids.length === 0) return;
  await ctx.run(markSent, [ctx.clock.now(), ids]);
}

const stats = 'SELECT COUNT(*) AS unsent, MIN(created_at) AS oldest FROM outbox WHERE sent_at IS NULL AND available_at <= $1';

export async function outboxStats(ctx: PgContext): Promise<OutboxStats> {
  const row = await ctx.row<{ unsent: number; oldest: number | null }>(stats, [ctx.clock.now()]);
  return { unsent: row?.unsent ?? 0, oldestCreatedAt: row?.oldest ?? null };
}
