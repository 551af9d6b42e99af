/**
 * The wire shapes of jobs, declared once: what the HTTP API answers (a job, its attempts,
 * its result, a page of jobs, a submission's answer), what the event stream carries, and
 * the result message published on `planrun.results`. The API serialises its answers
 * through the schemas here; the client (src/client/types.ts) and the ledger's outbox
 * (src/ledger/ledger.ts) take their types from here. Times are ISO 8601 strings.
 *
 * Each type's fields and its schema's `properties` are held to the same keys by the
 * compiler (schema.ts): a field added to one and not the other does not compile.
 */
import type { SerializedError } from '../core/errors.js';
import type { AttemptOutcome, FailureReason, JobState } from '../ledger/states.js';
import { outputFileSchema, type OutputFile } from './outputs.js';
import { allRequired, nullableTimeSchema, timeSchema, type RequiredKeys, type SchemaProperties } from './schema.js';

export type { JobState };
/**
 * A job's state as the API shows it: the ledger's, and `scheduled` for a queued job whose
 * submission put it later (runAt, delaySeconds) until that time (docs/state-machine.md).
 */
export type ShownJobState = JobState | 'scheduled';
/** Why a queued job has no work in flight yet (docs/dispatch.md); null when it has, or is not queued. */
export type WaitingFor = 'tenant_limit' | 'concurrency_key' | 'no_free_slot' | 'scheduled';
export type TerminalJobState = 'finished' | 'failed';

/**
 * Why a failed job failed, as the API reports it: one of FailureReason, or (from a server
 * newer than this client) a reason this version does not name.
 */
export type FailureReasonView = FailureReason | (string & {});

/** How an attempt ended, as the API reports it: one of AttemptOutcome, or one a newer server added. */
export type AttemptOutcomeView = AttemptOutcome | (string & {});

/** The settled attempt's data and where its outputs were stored. */
export interface JobResult {
  /** What the job returned, as JSON. */
  data?: unknown;
  /** Output name -> where it was stored (a path or `s3://` URL), scoped to the settled attempt. */
  outputs?: Record<string, string>;
  /** The same outputs with their size and sha256: name -> `{ location, bytes, sha256 }` (src/wire/outputs.ts). */
  outputFiles?: Record<string, OutputFile>;
}

export interface AttemptView {
  /** From 1. */
  attempt: number;
  worker: string;
  startedAt: string;
  endedAt: string | null;
  /** Null while it runs. */
  outcome: AttemptOutcomeView | null;
  error: SerializedError | null;
}

/**
 * A job as `GET /v1/jobs` lists it and its event stream carries it. Internals stay out
 * (lease token, lease holder, the due time of the next attempt), and so does the input:
 * it can be large, and the caller sent it.
 */
/**
 * Resource limits of one run (issue 13): memory of all its processes together, and how
 * many processes and threads it may have at once. A submission may only lower what its
 * job type declares: the worker enforces the lower of the two.
 */
export interface JobLimits {
  memoryMb?: number;
  processes?: number;
}

export interface JobSummary {
  id: string;
  type: string;
  tenant: string;
  state: ShownJobState;
  /** The current (or last) attempt, from 1. */
  attempt: number;
  maxAttempts: number;
  /** How long one run may take, as submitted; null: the job type's or the worker's default. */
  timeoutSeconds: number | null;
  /** Resource limits of one run, as submitted (a job type's own limits still hold where they are lower); null: the type's. */
  limits: JobLimits | null;
  requires: string[];
  idempotencyKey: string | null;
  /** A cancel was asked for while the job ran; its worker stops it at its next heartbeat. */
  cancelRequested: boolean;
  /** 0..1 as the running attempt last reported it, or null before it reported any. */
  progress: number | null;
  progressMessage: string | null;
  /** The settled attempt's data and where its outputs were stored. */
  result: JobResult | null;
  error: SerializedError | null;
  /** Why a failed job failed: permanent, exhausted, cancelled, unroutable. */
  reason: FailureReasonView | null;
  createdAt: string;
  updatedAt: string;
  startedAt: string | null;
  endedAt: string | null;
}

/** A job with its attempt history, as `GET /v1/jobs/:id` and cancel answer it. */
export interface JobView extends JobSummary {
  waitingFor: WaitingFor | null;
  attempts: AttemptView[];
  /** The failed job this one was made from by a retry (`POST /v1/jobs/:id/retry`), or null. */
  retryOf: string | null;
  /** The job a retry made from this one, or null. */
  retriedBy: string | null;
}

/** A job that has ended. */
export type TerminalJobView = JobView & { state: TerminalJobState };

/** The answer to a submission: the job as it stands; `created` is false when the idempotency key named an existing job. */
export interface SubmittedJob extends JobSummary {
  created: boolean;
}

/** The answer to `POST /v1/jobs/batch`: one submitted job per item, in the order sent. */
export interface SubmittedBatch {
  jobs: SubmittedJob[];
}

/** A page of `GET /v1/jobs`, newest first. */
export interface JobPage {
  jobs: JobSummary[];
  /** Pass it as `cursor` for the next page; null on the last page. */
  nextCursor: string | null;
}

/**
 * One event of a job's stream, with the job as it stands: `state` when its state, attempt
 * or cancel request changed (and once on connect), `progress` when only its progress did.
 * The last event is a `state` event with a terminal state.
 */
export interface JobEvent {
  type: 'state' | 'progress';
  job: JobSummary;
}

/**
 * A result message, as published on the topic exchange `planrun.results` with message
 * id = job id and routing key `<tenant>.<type>.<finished|failed>`: the one announcement
 * of a job that ended.
 */
export interface ResultMessage {
  id: string;
  idempotencyKey: string | null;
  tenant: string;
  type: string;
  state: TerminalJobState;
  attempt: number;
  reason?: FailureReason;
  result?: JobResult;
  error?: SerializedError;
}

// Response schemas: they document the API and make fastify serialise exactly these fields.

const serializedErrorProperties = {
  class: { type: 'string', enum: ['permanent', 'transient', 'fatal'] },
  code: { type: 'string' },
  message: { type: 'string' },
  stack: {
    type: 'string',
    description: 'where job code threw an error that is none of the three classes: its stack, at most 4096 characters (attempts only)',
  },
  logTail: {
    type: 'string',
    description: "a failed run's last log lines (stdout, stderr and ctx.log; at most 20 lines, 4096 characters): what the job said last",
  },
} as const satisfies SchemaProperties<SerializedError>;

const serializedErrorRequired = ['class', 'code', 'message'] as const satisfies ReadonlyArray<RequiredKeys<SerializedError>>;

export const serializedErrorSchema = {
  type: ['object', 'null'],
  required: serializedErrorRequired,
  properties: serializedErrorProperties,
} as const;

const jobResultProperties = {
  data: { description: 'what the job returned, as JSON' },
  outputs: { type: 'object', additionalProperties: { type: 'string' }, description: 'output name -> where it was stored' },
  outputFiles: { type: 'object', additionalProperties: outputFileSchema, description: 'output name -> { location, bytes, sha256 }' },
} as const satisfies SchemaProperties<JobResult>;

const jobResultSchema = { type: ['object', 'null'], properties: jobResultProperties } as const;

const summaryProperties = {
  id: { type: 'string' },
  type: { type: 'string' },
  tenant: { type: 'string' },
  state: { type: 'string', enum: ['scheduled', 'queued', 'running', 'finished', 'failed'] },
  attempt: { type: 'integer', description: 'the current (or last) attempt, from 1' },
  maxAttempts: { type: 'integer' },
  timeoutSeconds: { type: ['integer', 'null'], description: "how long one run may take, as submitted; null: the job type's or the worker's default" },
  limits: {
    type: ['object', 'null'],
    properties: { memoryMb: { type: 'integer' }, processes: { type: 'integer' } },
    description: "resource limits of one run, as submitted (the job type's own limits hold where lower); null: the type's",
  },
  requires: { type: 'array', items: { type: 'string' } },
  idempotencyKey: { type: ['string', 'null'] },
  cancelRequested: { type: 'boolean' },
  progress: { type: ['number', 'null'], description: 'from 0 to 1, as the running attempt last reported' },
  progressMessage: { type: ['string', 'null'] },
  result: jobResultSchema,
  error: serializedErrorSchema,
  reason: { type: ['string', 'null'], description: 'why a failed job failed: permanent, exhausted, cancelled, unroutable' },
  createdAt: timeSchema,
  updatedAt: timeSchema,
  startedAt: nullableTimeSchema,
  endedAt: nullableTimeSchema,
} as const satisfies SchemaProperties<JobSummary>;

const summaryRequired = allRequired(summaryProperties);

export const jobSummarySchema = { type: 'object', required: summaryRequired, properties: summaryProperties } as const;

const submittedJobProperties = {
  ...summaryProperties,
  created: { type: 'boolean', description: 'false when the idempotency key named a job submitted before, which is returned unchanged' },
} as const satisfies SchemaProperties<SubmittedJob>;

export const submittedJobSchema = { type: 'object', required: allRequired(submittedJobProperties), properties: submittedJobProperties } as const;

const submittedBatchProperties = { jobs: { type: 'array', items: submittedJobSchema } } as const satisfies SchemaProperties<SubmittedBatch>;

export const submittedBatchSchema = { type: 'object', required: allRequired(submittedBatchProperties), properties: submittedBatchProperties } as const;

const attemptProperties = {
  attempt: { type: 'integer' },
  worker: { type: 'string' },
  startedAt: timeSchema,
  endedAt: nullableTimeSchema,
  outcome: {
    type: ['string', 'null'],
    description: 'finished, failed, retried, expired, released (handed back by its worker: a Fatal error or a stop), cancelled; null while it runs',
  },
  error: serializedErrorSchema,
} as const satisfies SchemaProperties<AttemptView>;

export const attemptViewSchema = { type: 'object', required: allRequired(attemptProperties), properties: attemptProperties } as const;

const jobViewProperties = {
  ...summaryProperties,
  waitingFor: {
    type: ['string', 'null'],
    enum: ['tenant_limit', 'concurrency_key', 'no_free_slot', 'scheduled', null],
    description:
      'why a queued job has no work in flight yet: its tenant at a running limit, its concurrency key at its limit, no free slot (busy workers, or its turn), or before its time; null otherwise',
  },
  attempts: { type: 'array', items: attemptViewSchema },
  retryOf: { type: ['string', 'null'], description: 'the failed job this one was made from by a retry, or null' },
  retriedBy: { type: ['string', 'null'], description: 'the job a retry made from this one, or null' },
} as const satisfies SchemaProperties<JobView>;

export const jobViewSchema = { type: 'object', required: allRequired(jobViewProperties), properties: jobViewProperties } as const;

const jobPageProperties = {
  jobs: { type: 'array', items: jobSummarySchema },
  nextCursor: { type: ['string', 'null'], description: 'pass it as `cursor` for the next page; null on the last page' },
} as const satisfies SchemaProperties<JobPage>;

export const jobPageSchema = { type: 'object', required: allRequired(jobPageProperties), properties: jobPageProperties } as const;
