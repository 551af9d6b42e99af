/**
 * settle: the worker's one report of how its attempt ended, keyed to (job, attempt,
 * token) and a live lease. Writes the outcome and its outbox row in one transaction.
 *
 *   finished                        -> finished                  (finish)
 *   permanent error                 -> failed/permanent          (fail_permanent)
 *   transient or fatal, attempts left -> queued@n+1 after backoff (retry)
 *   transient or fatal, none left   -> failed/exhausted          (exhaust)
 *   any error after a cancel request -> failed/cancelled         (cancel_running)
 *
 * The edge is chosen from the row as read, by the rules every driver shares
 * (shared/lease-rules.ts); the guarded UPDATE of end-attempt.ts then applies it.
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
import type { SqliteContext } from '../context.js';
import { type JobRow, selectJobById, toJob } from '../rows.js';
import { fail, finish, requeue } from './end-attempt.js';

export function settle(ctx: SqliteContext, params: SettleParams): SettleResult {
  const outcome = validateSettleOutcome(params);
  const row = ctx.sql(selectJobById).get(params.jobId) as JobRow | undefined;
  const job = row ? toJob(row) : undefined;
  const loss = leaseLoss(job, params, ctx.clock.now());
  if (loss || !row || !job) return { accepted: false, reason: loss ?? 'unknown_job' };

  const exit = { row, expect: 'live' as const };
  const transition = settleTransition(job, outcome);
  let after: JobRow | undefined;
  switch (transition) {
    case 'finish':
      after = outcome.kind === 'finished' ? finish(ctx, exit, outcome.result) : undefined;
      break;
    case 'cancel_running':
      after = fail(ctx, exit, 'cancelled', cancelledError, 'cancelled');
      break;
    case 'fail_permanent':
      after = outcome.kind === 'failed' ? fail(ctx, exit, 'permanent', outcome.error, 'failed') : undefined;
      break;
    case 'retry':
      after = outcome.kind === 'failed' ? requeue(ctx, exit, 'retried', outcome.error) : undefined;
      break;
    case 'exhaust':
      after = outcome.kind === 'failed' ? fail(ctx, exit, 'exhausted', outcome.error, 'failed') : undefined;
      break;
  }
  if (!after) throw new Error(`planrun ledger: settle of ${params.jobId}@${params.attempt} lost its guard inside its transaction`);
  return { accepted: true, job: toJob(after), transition };
}
