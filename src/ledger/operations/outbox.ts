/**
 * The outbox: messages written in the same transaction as the ledger change they
 * announce, published later by the relay, and marked sent only after the broker
 * confirmed them.
 *
 *   enqueueWork(job, availableAt)   -> a work message for the job's current attempt
 *   enqueueResult(job)              -> the one result-or-failure message of a terminal job
 *                                      (a unique index refuses a second one)
 *   outboxTake(limit)               -> due unsent rows, oldest first; takes no lock and marks
 *                                      nothing, so a take that is never marked comes back
 *   outboxClaim(limit, claimMs)     -> due unsent rows no relay claims, oldest first, claimed
 *                                      for claimMs: the relay's take when several orchestrators
 *                                      share the ledger (a claim that runs out comes back)
 *   outboxUnclaim(ids)              -> claimed rows the relay could not publish, claimable at once
 *   outboxMarkSent(ids)             -> those rows are never taken again
 *   outboxStats()                   -> how many due rows wait, and since when
 */
import { LedgerError } from '../errors.js';
import type { Job, OutboxClaimParams, OutboxMessage, OutboxStats } from '../ledger.js';
import { resultMessage, workMessage } from '../shared/outbox-messages.js';
import { run, type OperationEnv, type Plan } from './plan.js';

export function* enqueueWork(job: Pick<Job, 'id' | 'attempt' | 'tenant' | 'type'>, now: number, availableAt: number): Plan<void> {
  yield* run('insertOutbox', { kind: 'work', jobId: job.id, body: JSON.stringify(workMessage(job)), now, availableAt });
}

export function* enqueueResult(job: Job, now: number): Plan<void> {
  yield* run('insertOutbox', { kind: 'result', jobId: job.id, body: JSON.stringify(resultMessage(job)), now, availableAt: now });
}

export function* outboxTake(limit: number, { now }: OperationEnv): Plan<OutboxMessage[]> {
  return yield* run('selectDueOutbox', { now, limit });
}

export function* outboxClaim({ limit, claimMs }: OutboxClaimParams, { now }: OperationEnv): Plan<OutboxMessage[]> {
  if (!Number.isInteger(limit) || limit < 1 || !Number.isInteger(claimMs) || claimMs < 1) {
    throw new LedgerError('invalid_input', 'outboxClaim needs a whole limit >= 1 and a whole claimMs >= 1');
  }
  const rows = yield* run('selectClaimableOutbox', { now, limit });
  if (rows.length > 0) yield* run('claimOutboxRows', { ids: rows.map((row) => row.id), claimedUntil: now + claimMs });
  return rows;
}

export function* outboxUnclaim(ids: readonly number[]): Plan<void> {
  if (ids.length > 0) yield* run('claimOutboxRows', { ids, claimedUntil: null });
}

export function* outboxMarkSent(ids: readonly number[], { now }: OperationEnv): Plan<void> {
  if (ids.length > 0) yield* run('markOutboxSent', { ids, now });
}

export function* outboxStats({ now }: OperationEnv): Plan<OutboxStats> {
  return yield* run('selectOutboxStats', { now });
}
