/**
 * reject: queued@n -> failed/unroutable, when no worker of the fleet offers the job's type
 * or a capability it requires; the error names what is missing. One guarded UPDATE. Its
 * work message, not yet sent, is withdrawn (set aside) in the same transaction: no worker
 * queue is made or fed for a job nobody can run (issue 18).
 *
 * Result: { rejected: true, job } or { rejected: false, reason: unknown_job | not_queued }
 * Throws: LedgerError invalid_input for a NUL in the error's code; a NUL in its message
 *   is replaced (U+FFFD), as in a settle.
 */
import type { RejectParams, RejectResult } from '../../ledger.js';
import { recordableError } from '../../shared/input-validation.js';
import type { PgContext } from '../context.js';
import { type JobRow, selectJobById, toJob } from '../rows.js';
import { enqueueResult } from './outbox.js';

const rejectQueued = `UPDATE jobs SET state = 'failed', failure_reason = 'unroutable', error_class = $3,
    error_code = $4, error_message = $5, redispatch_at = NULL, ended_at = $2, updated_at = $2
  WHERE id = $1 AND state = 'queued'
  RETURNING *`;
const withdrawWork = `UPDATE outbox SET sent_at = $2, set_aside_reason = 'withdrawn: the job was rejected as unroutable'
  WHERE job_id = $1 AND kind = 'work' AND sent_at IS NULL`;

export async function reject(ctx: PgContext, params: RejectParams): Promise<RejectResult> {
  const now = ctx.clock.now();
  const error = recordableError(params.error);
  const row = await ctx.row<JobRow>(rejectQueued, [params.jobId, now, error.class, error.code, error.message]);
  if (row) {
    await ctx.run(withdrawWork, [params.jobId, now]);
    await enqueueResult(ctx, row, now);
    return { rejected: true, job: toJob(row) };
  }
  const exists = await ctx.row<JobRow>(selectJobById, [params.jobId]);
  return { rejected: false, reason: exists ? 'not_queued' : 'unknown_job' };
}
