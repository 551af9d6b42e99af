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
import type { SqliteContext } from '../context.js';
import { type JobRow, selectJobById, toJob } from '../rows.js';
import { enqueueResult } from './outbox.js';

const setAside = `UPDATE outbox SET sent_at = @now, set_aside_reason = @reason WHERE id = @id AND sent_at IS NULL
  RETURNING kind, job_id, body`;
const failQueued = `UPDATE jobs SET state = 'failed', failure_reason = 'permanent', error_class = 'permanent',
    error_code = @code, error_message = @message, redispatch_at = NULL, ended_at = @now, updated_at = @now
  WHERE id = @jobId AND state = 'queued' AND attempt = @attempt`;

export function outboxSetAside(ctx: SqliteContext, rows: readonly OutboxSetAside[]): OutboxSetAsideResult {
  const now = ctx.clock.now();
  const failedJobs: Job[] = [];
  for (const { id, reason } of rows) {
    const message = recordableText(reason);
    const row = ctx.sql(setAside).get({ id, now, reason: message }) as { kind: string; job_id: string; body: string } | undefined;
    if (row?.kind !== 'work') continue;
    const { attempt } = JSON.parse(row.body) as WorkMessage;
    const failed = ctx.sql(failQueued).run({ jobId: row.job_id, attempt, now, code: undeliverableCode, message }).changes;
    if (failed !== 1) continue;
    const job = ctx.sql(selectJobById).get(row.job_id) as JobRow;
    enqueueResult(ctx, job);
    failedJobs.push(toJob(job));
  }
  return { failedJobs };
}
