/**
 * progress: the live attempt's latest fraction and message. Fenced like check: progress
 * from a stale attempt is refused and changes nothing.
 *
 * Params: jobId, attempt, token, fraction in [0, 1], message?
 * Result: { accepted: true } or { accepted: false, reason }
 * Throws: LedgerError invalid_input for a fraction outside [0, 1]. A NUL in the message
 *   is replaced (U+FFFD), never refused: job code wrote it.
 */
import type { FenceResult, RecordProgressParams } from '../../ledger.js';
import { recordableProgressMessage, validateProgressFraction } from '../../shared/input-validation.js';
import { fenceLoss } from '../../shared/lease-rules.js';
import type { SqliteContext } from '../context.js';
import { type JobRow, selectJobById, toJob } from '../rows.js';

const update = `UPDATE jobs SET progress = @fraction, progress_message = @message, updated_at = @now
  WHERE id = @jobId AND state = 'running' AND attempt = @attempt AND lease_token = @token
    AND lease_deadline > @now AND cancel_requested = 0`;

export function recordProgress(ctx: SqliteContext, params: RecordProgressParams): FenceResult {
  validateProgressFraction(params.fraction);
  const now = ctx.clock.now();
  const changed = ctx.sql(update).run({ ...params, message: recordableProgressMessage(params.message), now }).changes;
  if (changed === 1) return { accepted: true };
  const row = ctx.sql(selectJobById).get(params.jobId) as JobRow | undefined;
  const reason = fenceLoss(row ? toJob(row) : undefined, params, now);
  if (!reason) throw new Error(`planrun ledger: progress of ${params.jobId}@${params.attempt} refused for no known reason`);
  return { accepted: false, reason };
}
