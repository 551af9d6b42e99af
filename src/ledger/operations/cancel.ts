/**
 * cancel: by the job's tenant. The row is read with lockJob and the edge applied by a
 * guarded UPDATE on the state it was read in.
 *   queued@n  -> failed/cancelled at once, with its failure message   (cancel_queued)
 *   running@n -> stays running with cancel_requested: the worker's next renewal or fence
 *                check says `cancelled`, it stops the job and settles it as cancelled;
 *                if it never does, the sweeper ends it when the lease runs out
 *   ended     -> refused `ended`; unknown or another tenant's job -> refused `unknown_job`
 */
import type { CancelParams, CancelResult } from '../ledger.js';
import { cancelledError } from '../shared/recorded-errors.js';
import { isTerminal } from '../states.js';
import { enqueueResult } from './outbox.js';
import { run, type OperationEnv, type Plan } from './plan.js';

export function* cancel(params: CancelParams, { now }: OperationEnv): Plan<CancelResult> {
  const job = yield* run('lockJob', { jobId: params.jobId });
  if (!job || (params.tenant !== undefined && job.tenant !== params.tenant)) {
    return { outcome: 'refused', reason: 'unknown_job' };
  }
  if (isTerminal(job.state)) return { outcome: 'refused', reason: 'ended', job };
  if (job.state === 'queued') {
    const after = yield* run('failQueuedJob', { jobId: job.id, attempt: job.attempt, reason: 'cancelled', error: cancelledError, now });
    if (!after) throw new Error(`planrun ledger: cancel of queued job ${job.id} lost its guard on the row it read`);
    yield* enqueueResult(after, now);
    return { outcome: 'cancelled', job: after };
  }
  const after = yield* run('requestCancel', { jobId: job.id, now });
  if (!after) throw new Error(`planrun ledger: cancel of running job ${job.id} lost its guard on the row it read`);
  return { outcome: 'cancel_requested', job: after };
}
