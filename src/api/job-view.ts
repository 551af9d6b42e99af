/**
 * How the API shows a job: the ledger's Job turned into the wire shapes of
 * src/wire/jobs.ts, which declares them (and the response schemas) once for the API and
 * the client. Times become ISO 8601 strings.
 */
import type { AttemptRecord, Job, RetryLinks } from '../ledger/ledger.js';
import type { AttemptView, JobSummary, JobView, ShownJobState, SubmittedJob, WaitingFor } from '../wire/jobs.js';
import { withOutputFiles } from '../wire/outputs.js';

/** `scheduled` for a queued job its submission put later, until then; else the ledger's state (a retry in its backoff stays queued). */
export function shownState(job: Job, now: number): ShownJobState {
  return job.state === 'queued' && job.attempt === 1 && job.notBefore > now ? 'scheduled' : job.state;
}

export function toJobSummary(job: Job, now: number): JobSummary {
  return {
    id: job.id,
    type: job.type,
    tenant: job.tenant,
    state: shownState(job, now),
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

export function toJobView(job: Job, attempts: readonly AttemptRecord[], links: RetryLinks, waitingFor: WaitingFor | null, now: number): JobView {
  return { ...toJobSummary(job, now), waitingFor, attempts: attempts.map(toAttemptView), retryOf: links.retryOf, retriedBy: links.retriedBy };
}

export function toSubmittedJob(job: Job, created: boolean, now: number): SubmittedJob {
  return { ...toJobSummary(job, now), created };
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
