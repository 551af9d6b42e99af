/**
 * cancel: by the job's tenant. The row is read FOR UPDATE and the edge applied by a
 * guarded UPDATE on the state it was read in.
 *   queued@n  -> failed/cancelled at once, with its failure message   (cancel_queued)
 *   running@n -> stays running with cancel_requested: the worker's next renewal or fence
 *                check says `cancelled`, it stops the job and settles it as cancelled;
 *                if it never does, the sweeper ends it when the lease runs out
 *   ended     -> refused `ended`; unknown or another tenant's job -> refused `unknown_job`
 */
import type { CancelParams, CancelResult } from '../../ledger.js';
import { cancelledError } from '../../shared/recorded-errors.js';
import { isTerminal } from '../../states.js';
import type { PgContext } from '../context.js';
import { type JobRow, lockJobById, toJob } from '../rows.js';
import { enqueueResult } from './outbox.js';

const cancelQueued = `UPDATE jobs SET state = 'failed', failure_reason = 'cancelled', error_class = $3,
    error_code = $4, error_message = $5, redispatch_at = NULL, ended_at = $2, updated_at = $2
  WHERE id = $1 AND state = 'queued'
  RETURNING *`;
const requestCancel = `UPDATE jobs SET cancel_requested = true, updated_at = $2 WHERE id = $1 AND state = 'running'
  RETURNING *`;

export async function cancel(ctx: PgContext, params: CancelParams): Promise<CancelResult> {
  const row = await ctx.row<JobRow>(lockJobById, [params.jobId]);
  if (!row || (params.tenant !== undefined && row.tenant !== params.tenant)) {
    return { outcome: 'refused', reason: 'unknown_job' };
  }
  if (isTerminal(row.state)) return { outcome: 'refused', reason: 'ended', job: toJob(row) };
  const now = ctx.clock.now();
  if (row.state === 'queued') {
    const after = await ctx.row<JobRow>(cancelQueued, [row.id, now, cancelledError.class, cancelledError.code, cancelledError.message]);
    if (!after) throw new Error(`planrun ledger: cancel of queued job ${row.id} lost its guard on a locked row`);
    await enqueueResult(ctx, after, now);
    return { outcome: 'cancelled', job: toJob(after) };
  }
  const after = await ctx.row<JobRow>(requestCancel, [row.id, now]);
  if (!after) throw new Error(`planrun ledger: cancel of running job ${row.id} lost its guard on a locked row`);
  return { outcome: 'cancel_requested', job: toJob(after) };
}
