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
import type { RejectParams, RejectResult } from '../ledger.js';
import { recordableError } from '../shared/input-validation.js';
import { enqueueResult } from './outbox.js';
import { run, type OperationEnv, type Plan } from './plan.js';

const withdrawn = 'withdrawn: the job was rejected as unroutable';

export function* reject(params: RejectParams, { now }: OperationEnv): Plan<RejectResult> {
  const error = recordableError(params.error);
  const { jobId } = params;
  const job = yield* run('failQueuedJob', { jobId, attempt: null, reason: 'unroutable', error, now });
  if (job) {
    yield* run('withdrawWork', { jobId, now, reason: withdrawn });
    yield* enqueueResult(job, now);
    return { rejected: true, job };
  }
  const exists = yield* run('selectJob', { jobId });
  return { rejected: false, reason: exists ? 'not_queued' : 'unknown_job' };
}
