/**
 * How the API shows a job: the ledger's Job turned into the wire shapes of
 * src/wire/jobs.ts, which declares them (and the response schemas) once for the API and
 * the client. Times become ISO 8601 strings.
 */
import type { AttemptRecord, Job, RetryLinks } from '../ledger/ledger.js';
import type { AttemptView, JobSummary, JobView, SubmittedJob } from '../wire/jobs.js';
import { withOutputFiles } from '../wire/outputs.js';

export function toJobSummary(job: Job): JobSummary {
  return {
    id: job.id,
    type: job.type,
    tenant: job.tenant,
    state: job.state,
    attempt: job.attempt,
    maxAttempts: job.maxAttempts,
    timeoutSeconds: job.timeoutSeconds,
    limits: job.limits,
    requires: job.requires,
    idempotencyKey: job.idempotencyKey,
    cancelRequested: job.cancelRequested,
    progress: job.progress,
    progressMessage: job.progressMessage,
    // A result stored before outputFiles existed gains them here (see withOutputFiles).
    result: withOutputFiles(job.result),
    error: job.error,
    reason: job.failureReason,
    createdAt: isoTime(job.createdAt),
    updatedAt: isoTime(job.updatedAt),
    startedAt: job.startedAt === null ? null : isoTime(job.startedAt),
    endedAt: job.endedAt === null ? null : isoTime(job.endedAt),
  };
}

export function toJobView(job: Job, attempts: readonly AttemptRecord[], links: RetryLinks): JobView {
  return { ...toJobSummary(job), attempts: attempts.map(toAttemptView), retryOf: links.retryOf, retriedBy: links.retriedBy };
}

export function toSubmittedJob(job: Job, created: boolean): SubmittedJob {
  return { ...toJobSummary(job), created };
}

function toAttemptView(attempt: AttemptRecord): AttemptView {
  return {
    attempt: attempt.attempt,
    worker: attempt.worker,
    startedAt: isoTime(attempt.startedAt),
    endedAt: attempt.endedAt === null ? null : isoTime(attempt.endedAt),
    outcome: attempt.outcome,
    error: attempt.error,
  };
}

export function isoTime(ms: number): string {
  return new Date(ms).toISOString();
}
