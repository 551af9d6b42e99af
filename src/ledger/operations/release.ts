/**
 * release: a worker hands back a live lease it will not finish (a Fatal error stopped the
 * worker, or the worker is stopping), keyed to (job, attempt, token) like a settle. The
 * error says why and is kept on the attempt; nothing waits for the lease to run out.
 *
 *   attempts left                    -> queued@n+1, due at once     (release)
 *   none left                        -> failed/exhausted            (exhaust)
 *   after a cancel request           -> failed/cancelled            (cancel_running)
 *
 * The attempt number moves on, so nothing more from attempt n is accepted (G3), and it
 * counts against maxAttempts (shared/lease-rules.ts releaseTransition says why). The row
 * is read with lockJob, as in settle, so the edge chosen cannot change under its UPDATE.
 *
 * Result: { accepted: true, job, transition } or { accepted: false, reason } with reason
 *   unknown_job (none, or another tenant's when `tenant` is given) | ended | superseded | expired
 *   (an expired lease is the sweeper's).
 * Throws: LedgerError invalid_input for a malformed error or a NUL in its code.
 */
import type { ReleaseParams, ReleaseResult } from '../ledger.js';
import { validateReleaseError } from '../shared/input-validation.js';
import { leaseLoss, ofTenant, releaseTransition } from '../shared/lease-rules.js';
import { cancelledError } from '../shared/recorded-errors.js';
import { fail, requeue, type Exit } from './end-attempt.js';
import { run, type OperationEnv, type Plan } from './plan.js';

export function* release(params: ReleaseParams, env: OperationEnv): Plan<ReleaseResult> {
  const error = validateReleaseError(params);
  const job = ofTenant(yield* run('lockJob', { jobId: params.jobId }), params.tenant);
  const loss = leaseLoss(job, params, env.now);
  if (loss || !job) return { accepted: false, reason: loss ?? 'unknown_job' };

  const exit: Exit = { job, expect: 'live' };
  const transition = releaseTransition(job);
  const after =
    transition === 'release'
      ? yield* requeue(exit, 'released', error, env, 'now')
      : transition === 'exhaust'
        ? yield* fail(exit, 'exhausted', error, 'failed', env)
        : yield* fail(exit, 'cancelled', cancelledError, 'cancelled', env);
  if (!after) throw new Error(`planrun ledger: release of ${params.jobId}@${params.attempt} lost its guard on the row it read`);
  return { accepted: true, job: after, transition };
}
