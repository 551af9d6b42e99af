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
 * is read FOR UPDATE, as in settle, so the edge chosen cannot change under its UPDATE.
 *
 * Result: { accepted: true, job, transition } or { accepted: false, reason } with reason
 *   unknown_job | ended | superseded | expired (an expired lease is the sweeper's).
 * Throws: LedgerError invalid_input for a malformed error or a NUL in its code.
 */
import type { ReleaseParams, ReleaseResult } from '../../ledger.js';
import { validateReleaseError } from '../../shared/input-validation.js';
import { leaseLoss, releaseTransition } from '../../shared/lease-rules.js';
import { cancelledError } from '../../shared/recorded-errors.js';
import type { PgContext } from '../context.js';
import { type JobRow, lockJobById, toJob } from '../rows.js';
import { fail, requeue } from './end-attempt.js';

export async function release(ctx: PgContext, params: ReleaseParams): Promise<ReleaseResult> {
  const error = validateReleaseError(params);
  const now = ctx.clock.now();
  const row = await ctx.row<JobRow>(lockJobById, [params.jobId]);
  const job = row ? toJob(row) : undefined;
  const loss = leaseLoss(job, params, now);
  if (loss || !row || !job) return { accepted: false, reason: loss ?? 'unknown_job' };

  const exit = { row, expect: 'live' as const, now };
  const transition = releaseTransition(job);
  const after =
    transition === 'release'
      ? await requeue(ctx, exit, 'released', error, 'now')
      : transition === 'exhaust'
        ? await fail(ctx, exit, 'exhausted', error, 'failed')
        : await fail(ctx, exit, 'cancelled', cancelledError, 'cancelled');
  if (!after) throw new Error(`planrun ledger: release of ${params.jobId}@${params.attempt} lost its guard on a locked row`);
  return { accepted: true, job: toJob(after), transition };
}
