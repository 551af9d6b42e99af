/**
 * outboxSetAside: rows the relay can never publish leave the outbox with their reason; a
 * work row's job, still queued@n at the row's attempt n, takes the edge
 * queued@n -> failed/permanent with error code `undeliverable` (set_aside), and its
 * failure message is enqueued like any other. Rows already sent or set aside are skipped.
 *
 * Result: { failedJobs } (the jobs this call failed).
 */
import { undeliverableCode, type Job, type OutboxSetAside, type OutboxSetAsideResult, type WorkMessage } from '../../ledger.js';
import { recordableText } from '../../shared/input-validation.js';
import type { PgContext } from '../context.js';
import { type JobRow, toJob } from '../rows.js';
import { enqueueResult } from './outbox.js';

const setAside = `UPDATE outbox SET sent_at = $2, set_aside_reason = $3 WHERE id = $1 AND sent_at IS NULL
  RETURNING kind, job_id, body`;
const failQueued = `UPDATE jobs SET state = 'failed', failure_reason = 'permanent', error_class = 'permanent',
    error_code = $3, error_message = $4, redispatch_at = NULL, ended_at = $5, updated_at = $5
  WHERE id = $1 AND state = 'queued' AND attempt = $2
  RETURNING *`;

export async function outboxSetAside(ctx: PgContext, rows: readonly OutboxSetAside[]): Promise<OutboxSetAsideResult> {
  const now = ctx.clock.now();
  const failedJobs: Job[] = [];
  for (const { id, reason } of rows) {
    const message = recordableText(reason);
    const row = await ctx.row<{ kind: string; job_id: string; body: WorkMessage }>(setAside, [id, now, message]);
    if (row?.kind !== 'work') continue;
    const job = await ctx.row<JobRow>(failQueued, [row.job_id, row.body.attempt, undeliverableCode, message, now]);
    if (!job) continue;
    await enqueueResult(ctx, job, now);
    failedJobs.push(toJob(job));
  }
  return { failedJobs };
}
