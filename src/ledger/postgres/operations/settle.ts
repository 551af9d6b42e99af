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
 * The row is read FOR UPDATE, so the edge chosen from it (cancel flag, attempts left)
 * cannot change under the guarded UPDATE that then applies it; a concurrent settle of
 * the same attempt waits, then reads the ended job and is refused.
 *
 * Result: { accepted: true, job, transition } or { accepted: false, reason } with reason
 *   unknown_job | ended | superseded | expired. A refused settle changes nothing, so a
 *   stale attempt announces nothing.
 * Throws: LedgerError invalid_input for a malformed outcome or a NUL in the error's code;
 *   a NUL in the error's message is replaced (U+FFFD), never refused: job code wrote it.
 */
import type { SettleParams, SettleResult } from '../../ledger.js';
import { validateSettleOutcome } from '../../shared/input-validation.js';
import { leaseLoss, settleTransition } from '../../shared/lease-rules.js';
import { cancelledError } from '../../shared/recorded-errors.js';
import type { PgContext } from '../context.js';
import { type JobRow, lockJobById, toJob } from '../rows.js';
import { fail, finish, requeue } from './end-attempt.js';

export async function settle(ctx: PgContext, params: SettleParams): Promise<SettleResult> {
  const outcome = validateSettleOutcome(params);
  const now = ctx.clock.now();
  const row = await ctx.row<JobRow>(lockJobById, [params.jobId]);
  const job = row ? toJob(row) : undefined;
  const loss = leaseLoss(job, params, now);
  if (loss || !row || !job) return { accepted: false, reason: loss ?? 'unknown_job' };

  const exit = { row, expect: 'live' as const, now };
  const transition = settleTransition(job, outcome);
  let after: JobRow | undefined;
  switch (transition) {
    case 'finish':
      after = outcome.kind === 'finished' ? await finish(ctx, exit, outcome.result) : undefined;
      break;
    case 'cancel_running':
      after = await fail(ctx, exit, 'cancelled', cancelledError, 'cancelled');
      break;
    case 'fail_permanent':
      after = outcome.kind === 'failed' ? await fail(ctx, exit, 'permanent', outcome.error, 'failed') : undefined;
      break;
    case 'retry':
      after = outcome.kind === 'failed' ? await requeue(ctx, exit, 'retried', outcome.error) : undefined;
      break;
    case 'exhaust':
      after = outcome.kind === 'failed' ? await fail(ctx, exit, 'exhausted', outcome.error, 'failed') : undefined;
      break;
  }
  if (!after) throw new Error(`planrun ledger: settle of ${params.jobId}@${params.attempt} lost its guard on a locked row`);
  return { accepted: true, job: toJob(after), transition };
}
