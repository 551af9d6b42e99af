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
 * Result: { accepted: true, job, transition } or { accepted: false, reason } with reason
 *   unknown_job | ended | superseded | expired. A refused settle changes nothing, so a
 *   stale attempt announces nothing.
 */
import { isSerializedError } from '../../../core/errors.js';
import { LedgerError, LedgerErrorCode } from '../../errors.js';
import type { SettleParams, SettleResult } from '../../ledger.js';
import type { SqliteContext } from '../context.js';
import { type JobRow, selectJobById, toJob } from '../rows.js';
import { cancelledError, fail, finish, requeue } from './end-attempt.js';
import { leaseLoss } from './lease-loss.js';

export function settle(ctx: SqliteContext, params: SettleParams): SettleResult {
  validateOutcome(params);
  const row = ctx.sql(selectJobById).get(params.jobId) as JobRow | undefined;
  const loss = leaseLoss(row, params, ctx.clock.now());
  if (loss || !row) return { accepted: false, reason: loss ?? 'unknown_job' };

  const exit = { row, expect: 'live' as const };
  const { outcome } = params;
  let transition: Extract<SettleResult, { accepted: true }>['transition'];
  let after: JobRow | undefined;
  if (outcome.kind === 'finished') {
    transition = 'finish';
    after = finish(ctx, exit, outcome.result);
  } else if (row.cancel_requested === 1) {
    transition = 'cancel_running';
    after = fail(ctx, exit, 'cancelled', cancelledError, 'cancelled');
  } else if (outcome.error.class === 'permanent') {
    transition = 'fail_permanent';
    after = fail(ctx, exit, 'permanent', outcome.error, 'failed');
  } else if (row.attempt < row.max_attempts) {
    transition = 'retry';
    after = requeue(ctx, exit, 'retried', outcome.error);
  } else {
    transition = 'exhaust';
    after = fail(ctx, exit, 'exhausted', outcome.error, 'failed');
  }
  if (!after) throw new Error(`planrun ledger: settle of ${params.jobId}@${params.attempt} lost its guard inside its transaction`);
  return { accepted: true, job: toJob(after), transition };
}

function validateOutcome(params: SettleParams): void {
  const outcome = params.outcome as { kind?: unknown; result?: unknown; error?: unknown } | undefined;
  if (outcome?.kind === 'finished') {
    if (typeof outcome.result !== 'object' || outcome.result === null) {
      throw new LedgerError(LedgerErrorCode.invalidInput, 'a finished settle needs a result object');
    }
    return;
  }
  if (outcome?.kind === 'failed' && isSerializedError(outcome.error)) return;
  throw new LedgerError(LedgerErrorCode.invalidInput, 'settle outcome must be {kind:"finished", result} or {kind:"failed", error:{class, code, message}}');
}
