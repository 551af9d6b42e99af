import type { SerializedError } from '../core/errors.js';
import type { AttemptRecord, Job, JobResult } from '../ledger/ledger.js';

/**
 * How the API shows a job. Internals stay out (lease token, lease holder, the due time of
 * the next attempt), and so does the input: it can be large, and the caller sent it.
 * Times are ISO 8601 strings.
 */
export interface JobSummary {
  id: string;
  type: string;
  tenant: string;
  state: Job['state'];
  attempt: number;
  maxAttempts: number;
  requires: string[];
  idempotencyKey: string | null;
  /** A cancel was asked for while the job ran; its worker stops it at its next heartbeat. */
  cancelRequested: boolean;
  progress: number | null;
  progressMessage: string | null;
  /** The settled attempt's data and where its outputs were stored. */
  result: JobResult | null;
  error: SerializedError | null;
  /** Why a failed job failed: permanent, exhausted, cancelled, unroutable. */
  reason: Job['failureReason'];
  createdAt: string;
  updatedAt: string;
  startedAt: string | null;
  endedAt: string | null;
}

export interface AttemptView {
  attempt: number;
  worker: string;
  startedAt: string;
  endedAt: string | null;
  outcome: AttemptRecord['outcome'];
  error: SerializedError | null;
}

/** The answer to a submission: `created` is false when the idempotency key named an existing job. */
export interface SubmittedJob extends JobSummary {
  created: boolean;
}

/** A job with its attempt history, as `GET /v1/jobs/:id` and cancel answer it. */
export interface JobDetail extends JobSummary {
  attempts: AttemptView[];
}

export function toJobSummary(job: Job): JobSummary {
  return {
    id: job.id,
    type: job.type,
    tenant: job.tenant,
    state: job.state,
    attempt: job.attempt,
    maxAttempts: job.maxAttempts,
    requires: job.requires,
    idempotencyKey: job.idempotencyKey,
    cancelRequested: job.cancelRequested,
    progress: job.progress,
    progressMessage: job.progressMessage,
    result: job.result,
    error: job.error,
    reason: job.failureReason,
    createdAt: isoTime(job.createdAt),
    updatedAt: isoTime(job.updatedAt),
    startedAt: job.startedAt === null ? null : isoTime(job.startedAt),
    endedAt: job.endedAt === null ? null : isoTime(job.endedAt),
  };
}

export function toJobDetail(job: Job, attempts: readonly AttemptRecord[]): JobDetail {
  return { ...toJobSummary(job), attempts: attempts.map(toAttemptView) };
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

const nullableTime = { type: ['string', 'null'], format: 'date-time' } as const;

const serializedErrorSchema = {
  type: ['object', 'null'],
  required: ['class', 'code', 'message'],
  properties: {
    class: { type: 'string', enum: ['permanent', 'transient', 'fatal'] },
    code: { type: 'string' },
    message: { type: 'string' },
    stack: {
      type: 'string',
      description: 'where job code threw an error that is none of the three classes: its stack, at most 4096 characters (attempts only)',
    },
  },
} as const;

const summaryProperties = {
  id: { type: 'string' },
  type: { type: 'string' },
  tenant: { type: 'string' },
  state: { type: 'string', enum: ['queued', 'running', 'finished', 'failed'] },
  attempt: { type: 'integer', description: 'the current (or last) attempt, from 1' },
  maxAttempts: { type: 'integer' },
  requires: { type: 'array', items: { type: 'string' } },
  idempotencyKey: { type: ['string', 'null'] },
  cancelRequested: { type: 'boolean' },
  progress: { type: ['number', 'null'], description: 'from 0 to 1, as the running attempt last reported' },
  progressMessage: { type: ['string', 'null'] },
  result: {
    type: ['object', 'null'],
    properties: {
      data: { description: 'what the job returned, as JSON' },
      outputs: { type: 'object', additionalProperties: { type: 'string' }, description: 'output name -> where it was stored' },
    },
  },
  error: serializedErrorSchema,
  reason: { type: ['string', 'null'], description: 'why a failed job failed: permanent, exhausted, cancelled, unroutable' },
  createdAt: { type: 'string', format: 'date-time' },
  updatedAt: { type: 'string', format: 'date-time' },
  startedAt: nullableTime,
  endedAt: nullableTime,
} as const;

const summaryRequired = Object.keys(summaryProperties);

/** Response schemas: they document the API and make fastify serialize exactly these fields. */
export const jobSummarySchema = { type: 'object', required: summaryRequired, properties: summaryProperties } as const;

export const submittedJobSchema = {
  type: 'object',
  required: [...summaryRequired, 'created'],
  properties: {
    ...summaryProperties,
    created: { type: 'boolean', description: 'false when the idempotency key named a job submitted before, which is returned unchanged' },
  },
} as const;

export const jobDetailSchema = {
  type: 'object',
  required: [...summaryRequired, 'attempts'],
  properties: {
    ...summaryProperties,
    attempts: {
      type: 'array',
      items: {
        type: 'object',
        required: ['attempt', 'worker', 'startedAt', 'endedAt', 'outcome', 'error'],
        properties: {
          attempt: { type: 'integer' },
          worker: { type: 'string' },
          startedAt: { type: 'string', format: 'date-time' },
          endedAt: nullableTime,
          outcome: {
            type: ['string', 'null'],
            description: 'finished, failed, retried, expired, released (handed back by its worker: a Fatal error or a stop), cancelled; null while it runs',
          },
          error: serializedErrorSchema,
        },
      },
    },
  },
} as const;
