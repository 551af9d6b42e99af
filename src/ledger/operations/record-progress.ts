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
import type { FenceResult, RecordProgressParams } from '../ledger.js';
import { recordableProgressMessage, validateProgressFraction } from '../shared/input-validation.js';
import { fenceLoss } from '../shared/lease-rules.js';
import { run, type OperationEnv, type Plan } from './plan.js';

export function* recordProgress(params: RecordProgressParams, env: OperationEnv): Plan<FenceResult> {
  validateProgressFraction(params.fraction);
  const { jobId, attempt, token, fraction } = params;
  const message = recordableProgressMessage(params.message);
  if (yield* run('updateProgress', { jobId, attempt, token, fraction, message, now: env.now })) return { accepted: true };
  // Refused: the row as it is now says why.
  const reason = fenceLoss(yield* run('selectJob', { jobId }), params, env.now);
  if (!reason) throw new Error(`planrun ledger: progress of ${jobId}@${attempt} refused for no known reason`);
  return { accepted: false, reason };
}
