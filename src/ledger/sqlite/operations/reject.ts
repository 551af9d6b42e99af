/**
 * reject: queued@n -> failed/unroutable, when no worker of the fleet offers the job's type
 * or a capability it requires; the error names what is missing. Its work message, not yet
 * sent, is withdrawn (set aside) in the same transaction: no worker queue is made or fed
 * for a job nobody can run (issue 18).
 *
 * Result: { rejected: true, job } or { rejected: false, reason: unknown_job | not_queued }
 * Throws: LedgerError invalid_input for a NUL in the error's code; a NUL in its message
 *   is replaced (U+FFFD), as in a settle.
 */
import type { RejectParams, RejectResult } from '../../ledger.js';
import { recordableError } from '../../shared/input-validation.js';
import type { SqliteContext } from '../context.js';
import { type JobRow, selectJobById, toJob } from '../rows.js';
import { enqueueResult } from './outbox.js';

const rejectQueued = `UPDATE jobs SET state = 'failed', failure_reason = 'unroutable', error_class = @class,
    error_code = @code, error_message = @message, redispatch_at = NULL, ended_at = @now, updated_at = @now
  WHERE id = @jobId AND state = 'queued'`;
const withdrawWork = `UPDATE outbox SET sent_at = @now, set_aside_reason = 'withdrawn: the job was rejected as unroutable'
  WHERE job_id = @jobId AND kind = 'work' AND sent_at IS NULL`;

export function reject(ctx: SqliteContext, params: RejectParams): RejectResult {
  const error = recordableError(params.error);
  const now = ctx.clock.now();
  const changed = ctx.sql(rejectQueued).run({ jobId: params.jobId, now, ...error }).changes;
  const row = ctx.sql(selectJobById).get(params.jobId) as JobRow | undefined;
  if (!row) return { rejected: false, reason: 'unknown_job' };
  if (changed !== 1) return { rejected: false, reason: 'not_queued' };
  ctx.sql(withdrawWork).run({ jobId: params.jobId, now });
  enqueueResult(ctx, row);
  return { rejected: true, job: toJob(row) };
}
