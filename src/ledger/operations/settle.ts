/**
 * settle: the worker's one report of how its attempt ended, keyed to (job, attempt,
 * token) and a live lease. Writes the outcome and its outbox row in one transaction.
 *
 *   finished                          -> finished                  (finish)
 *   permanent error                   -> failed/permanent          (fail_permanent)
 *   transient or fatal, attempts left -> queued@n+1 after backoff  (retry)
 *   transient or fatal, none left     -> failed/exhausted          (exhaust)
 *   any error after a cancel request  -> failed/cancelled          (cancel_running)
 *
 * The edge is chosen from the row as read by lockJob (shared/lease-rules.ts), so it cannot
 * change under the guarded UPDATE of end-attempt.ts that then applies it; a concurrent
 * settle of the same attempt waits, then reads the ended job and is refused.
 *
 * Result: { accepted: true, job, transition } or { accepted: false, reason } with reason
 *   unknown_job (none, or another tenant's when `tenant` is given) | ended | superseded | expired. A refused settle changes nothing, so a
 *   stale attempt announces nothing.
 * Throws: LedgerError invalid_input for a malformed outcome or a NUL in the error's code;
 *   a NUL in the error's message is replaced (U+FFFD), never refused: job code wrote it.
 */
import type { Job, SettleParams, SettleResult } from '../ledger.js';
import { validateSettleOutcome } from '../shared/input-validation.js';
import { leaseLoss, ofTenant, settleTransition } from '../shared/lease-rules.js';
import { cancelledError } from '../shared/recorded-errors.js';
import { fail, finish, requeue, type Exit } from './end-attempt.js';
import { run, type OperationEnv, type Plan } from './plan.js';

export function* settle(params: SettleParams, env: OperationEnv): Plan<SettleResult> {
  const outcome = validateSettleOutcome(params);
  const job = ofTenant(yield* run('lockJob', { jobId: params.jobId }), params.tenant);
  const loss = leaseLoss(job, params, env.now);
  if (loss || !job) return { accepted: false, reason: loss ?? 'unknown_job' };

  const exit: Exit = { job, expect: 'live' };
  const transition = settleTransition(job, outcome);
  let after: Job | undefined;
  if (outcome.kind === 'finished') {
    after = yield* finish(exit, outcome.result, env);
  } else if (transition === 'cancel_running') {
    after = yield* fail(exit, 'cancelled', cancelledError, 'cancelled', env);
  } else if (transition === 'fail_permanent') {
    after = yield* fail(exit, 'permanent', outcome.error, 'failed', env);
  } else if (transition === 'retry') {
    after = yield* requeue(exit, 'retried', outcome.error, env);
  } else {
    after = yield* fail(exit, 'exhausted', outcome.error, 'failed', env);
  }
  if (!after) throw new Error(`planrun ledger: settle of ${params.jobId}@${params.attempt} lost its guard on the row it read`);
  return { accepted: true, job: after, transition };
}
