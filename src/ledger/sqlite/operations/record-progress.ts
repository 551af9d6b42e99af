/**
 * progress: the live attempt's latest fraction and message. Fenced like check: progress
 * from a stale attempt is refused and changes nothing.
 *
 * Params: jobId, attempt, token, fraction in [0, 1], message?
 * Result: { accepted: true } or { accepted: false, reason }
 * Throws: LedgerError invalid_input for a fraction outside [0, 1].
 */
import { LedgerError, LedgerErrorCode } from '../../errors.js';
import type { FenceResult, RecordProgressParams } from '../../ledger.js';
import type { SqliteContext } from '../context.js';
import { type JobRow, selectJobById } from '../rows.js';
import { fenceLoss } from './lease-loss.js';

const update = `UPDATE jobs SET progress = @fraction, progress_message = @message, updated_at = @now
  WHERE id = @jobId AND state = 'running' AND attempt = @attempt AND lease_token = @token
    AND lease_deadline > @now AND cancel_requested = 0`;

export function recordProgress(ctx: SqliteContext, params: RecordProgressParams): FenceResult {
  if (typeof params.fraction !== 'number' || !(params.fraction >= 0 && params.fraction <= 1)) {
    throw new LedgerError(LedgerErrorCode.invalidInput, `progress fraction must be a number from 0 to 1, got ${params.fraction}`);
  }
  const now = ctx.clock.now();
  const changed = ctx.sql(update).run({ ...params, message: params.message ?? null, now }).changes;
  if (changed === 1) return { accepted: true };
  const row = ctx.sql(selectJobById).get(params.jobId) as JobRow | undefined;
  const reason = fenceLoss(row, params, now);
  if (!reason) throw new Error(`planrun ledger: progress of ${params.jobId}@${params.attempt} refused for no known reason`);
  return { accepted: false, reason };
}
