/**
 * Redrive (issue 14): a failed job is never run again; a new job is made from it, with a
 * new id and everything it was submitted with, and linked to it (job_retries), so each
 * keeps its one result message and the old failure stays where it was.
 *
 * retry:      failed (any reason, cancelled included) -> a new queued@1 job, once: a job
 *             retried before answers the job made from it (created false). Any other
 *             state -> refused `not_failed`; unknown or another tenant's -> `unknown_job`.
 *             The failed row is read with lockJob, so two retries of it at once make one job.
 * retryMany:  one batch of unretried failed jobs matching a filter (cancelled ones left
 *             out), read locked and skipping rows another transaction holds, each retried
 *             as above, in one transaction.
 */
import { randomUUID } from 'node:crypto';

import type { Job, RetriedJob, RetryLinks, RetryManyParams, RetryParams, RetryResult } from '../ledger.js';
import { validateBatchLimit, validateFailedJobFilter, type ValidSubmission } from '../shared/input-validation.js';
import { run, type OperationEnv, type Plan } from './plan.js';
import { insertQueuedJob } from './submit.js';

/** Most jobs one retryMany batch takes. */
export const maxRetryBatch = 1000;

export function* retry(params: RetryParams, env: OperationEnv): Plan<RetryResult> {
  const job = yield* run('lockJob', { jobId: params.jobId });
  if (!job || (params.tenant !== undefined && job.tenant !== params.tenant)) return { outcome: 'refused', reason: 'unknown_job' };
  if (job.state !== 'failed') return { outcome: 'refused', reason: 'not_failed', job };
  const { retriedBy } = yield* run('selectRetryLinks', { jobId: job.id });
  if (retriedBy !== null) {
    const existing = yield* run('selectJob', { jobId: retriedBy });
    if (!existing) throw new Error(`planrun ledger: job ${job.id} names its retry ${retriedBy}, which is gone`);
    return { outcome: 'retried', job: existing, retryOf: job.id, created: false };
  }
  return { outcome: 'retried', ...(yield* redrive(job, env)), created: true };
}

export function* retryMany(params: RetryManyParams, env: OperationEnv): Plan<RetriedJob[]> {
  const limit = validateBatchLimit(params.limit, maxRetryBatch);
  const candidates = yield* run('selectRetryCandidates', { filter: validateFailedJobFilter(params), limit });
  const retried: RetriedJob[] = [];
  for (const job of candidates) retried.push(yield* redrive(job, env));
  return retried;
}

export function* getRetryLinks(jobId: string): Plan<RetryLinks> {
  return yield* run('selectRetryLinks', { jobId });
}

/** The new job made from `failed` (due now, with its priority and concurrency key), and its link. */
function* redrive(failed: Job, env: OperationEnv): Plan<RetriedJob> {
  const submission: ValidSubmission = {
    tenant: failed.tenant,
    type: failed.type,
    input: JSON.stringify(failed.input),
    requires: JSON.stringify(failed.requires),
    // The key names the first job; the one made from it answers to its own id.
    idempotencyKey: null,
    maxAttempts: failed.maxAttempts,
    timeoutSeconds: failed.timeoutSeconds,
    limits: failed.limits === null ? null : JSON.stringify(failed.limits),
  };
  const dispatch = { priority: failed.priority, concurrencyKey: failed.concurrencyKey, concurrencyLimit: failed.concurrencyLimit, notBefore: env.now };
  const job = yield* insertQueuedJob(randomUUID(), submission, dispatch, env);
  if (!job) throw new Error(`planrun ledger: the retry of job ${failed.id} (a job without an idempotency key) was not inserted`);
  yield* run('insertRetryLink', { jobId: failed.id, retryId: job.id, now: env.now });
  return { retryOf: failed.id, job };
}
