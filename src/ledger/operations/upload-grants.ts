/**
 * Upload grants: which attempts the fence handed presigned upload URLs (the S3 store), so
 * that the store cleaner removes what losing attempts uploaded without listing the bucket.
 *
 *   recordUploadGrant(job, attempt, validUntil)  -> the attempt's grant, before any URL is
 *                                                   handed out; valid_until only grows
 *   claimUploadCleanups(grace, limit, claim)     -> decided attempts whose last URL stopped
 *                                                   working `grace` ago: the delivered one
 *                                                   closed as kept, the losing ones claimed
 *                                                   and returned
 *   markUploadsRemoved(attempts)                 -> their grants closed as removed
 *
 * The delivered attempt is the one a finished job settled (attempts only grow, so it is
 * the job's attempt); every other attempt of a decided job lost. A claim keeps a second
 * orchestrator from taking the same batch while the first removes it; one that runs out is
 * taken again, and removing an attempt's objects twice is harmless.
 */
import type { AttemptKey, ClaimUploadCleanupsParams, UploadCleanupBatch, UploadGrantParams } from '../ledger.js';
import { LedgerError } from '../errors.js';
import { JobState } from '../states.js';
import { run, type OperationEnv, type Plan } from './plan.js';

export function* recordUploadGrant(params: UploadGrantParams, { now }: OperationEnv): Plan<void> {
  requireAttempt(params);
  if (!Number.isFinite(params.validUntil)) throw new LedgerError('invalid_input', 'validUntil must be a time in epoch milliseconds');
  yield* run('upsertUploadGrant', { jobId: params.jobId, attempt: params.attempt, now, validUntil: params.validUntil });
}

export function* claimUploadCleanups(params: ClaimUploadCleanupsParams, { now }: OperationEnv): Plan<UploadCleanupBatch> {
  const { graceMs, limit, claimMs } = params;
  if (!(graceMs >= 0) || !(claimMs > 0) || !Number.isInteger(limit) || limit < 1) {
    throw new LedgerError('invalid_input', 'claimUploadCleanups needs graceMs >= 0, claimMs > 0 and a whole limit >= 1');
  }
  const grants = yield* run('selectDecidedUploadGrants', { now, validBefore: now - graceMs, limit });
  const delivered = grants.filter((g) => g.jobState === JobState.finished && g.attempt === g.jobAttempt);
  const lost = grants.filter((g) => !delivered.includes(g));
  if (delivered.length > 0) yield* run('closeUploadGrants', { attempts: delivered.map(key), now, outcome: 'delivered' });
  if (lost.length > 0) yield* run('claimUploadGrants', { attempts: lost.map(key), claimedUntil: now + claimMs });
  return { remove: lost.map(({ jobId, attempt, tenant }) => ({ jobId, attempt, tenant })), kept: delivered.length };
}

export function* markUploadsRemoved(attempts: readonly AttemptKey[], { now }: OperationEnv): Plan<void> {
  attempts.forEach(requireAttempt);
  if (attempts.length > 0) yield* run('closeUploadGrants', { attempts: attempts.map(key), now, outcome: 'removed' });
}

function key({ jobId, attempt }: AttemptKey): AttemptKey {
  return { jobId, attempt };
}

function requireAttempt({ jobId, attempt }: AttemptKey): void {
  if (typeof jobId !== 'string' || jobId.length === 0) throw new LedgerError('invalid_input', 'jobId must be a non-empty string');
  if (!Number.isInteger(attempt) || attempt < 1) throw new LedgerError('invalid_input', 'attempt must be a whole number >= 1');
}
