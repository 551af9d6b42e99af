/**
 * progress: the live attempt's latest fraction and message, by one guarded UPDATE. Fenced
 * like check: progress from a stale attempt is refused and changes nothing.
 *
 * Params: jobId, attempt, token, fraction in [0, 1], message?
 * Result: { accepted: true } or { accepted: false, reason } with reason
 *   unknown_job | ended | superseded | expired | cancelled
 * Throws: LedgerError invalid_input for a fraction outside [0, 1]. A NUL in the message
 *   is replaced (U+FFFD), never refused: job code wrote it.
 */
import type { FenceResult, RecordProgressParams } from '../../ledger.js';
import { recordableProgressMessage, validateProgressFraction } from '../../shared/input-validation.js';
import { fenceLoss } from '../../shared/lease-rules.js';
import type { PgContext } from '../context.js';
import { type JobRow, selectJobById, toJob } from '../rows.js';

const update = `UPDATE jobs SET progress = $4, progress_message = $5, updated_at = $6
  WHERE id = $1 AND state = 'running' AND attempt = $2 AND lease_token = $3
    AND lease_deadline > $6 AND NOT cancel_requested`;

export async function recordProgress(ctx: PgContext, params: RecordProgressParams): Promise<FenceResult> {
  validateProgressFraction(params.fraction);
  const now = ctx.clock.now();
  const changed = await ctx.run(update, [params.jobId, params.attempt, params.token, params.fraction, recordableProgressMessage(params.message), now]);
  if (changed === 1) return { accepted: true };
  const row = await ctx.row<JobRow>(selectJobById, [params.jobId]);
  const reason = fenceLoss(row ? toJob(row) : undefined, params, now);
  if (!reason) throw new Error(`planrun ledger: progress of ${params.jobId}@${params.attempt} refused for no known reason`);
  return { accepted: false, reason };
}
