/**
 * The wire shapes of redrive and the holding area (issue 14): the answer to a retry of one
 * job, to a bulk retry, and `GET /v1/failures`. Times are ISO 8601 strings.
 */
import { jobViewSchema, type JobView } from './jobs.js';
import { allRequired, timeSchema, type SchemaProperties } from './schema.js';

/** `POST /v1/jobs/:id/retry`: the job made from the failed one; `created` false when it had been retried before (that retry's job). */
export interface RetriedJobView extends JobView {
  created: boolean;
}

/** One job a bulk retry made. */
export interface BulkRetriedJob {
  /** The new job. */
  id: string;
  /** The failed job it was made from. */
  retryOf: string;
}

/** `POST /v1/jobs/retry`: how many failed jobs were retried, and the jobs made from them. */
export interface BulkRetryAnswer {
  retried: number;
  jobs: BulkRetriedJob[];
}

/** One line of the holding area: the unretried failed jobs of one type that failed with one error code. */
export interface FailureGroupView {
  type: string;
  code: string;
  count: number;
  firstEndedAt: string;
  lastEndedAt: string;
  /** One job of the group, to look at. */
  sampleJobId: string;
}

/** `GET /v1/failures`: largest group first. */
export interface FailuresView {
  groups: FailureGroupView[];
}

const retriedJobProperties = {
  ...jobViewSchema.properties,
  created: { type: 'boolean', description: 'false when the job had been retried before: the answer is that retry' },
} as const satisfies SchemaProperties<RetriedJobView>;

export const retriedJobSchema = { type: 'object', required: allRequired(retriedJobProperties), properties: retriedJobProperties } as const;

const bulkRetriedJobProperties = {
  id: { type: 'string', description: 'the new job' },
  retryOf: { type: 'string', description: 'the failed job it was made from' },
} as const satisfies SchemaProperties<BulkRetriedJob>;

const bulkRetryProperties = {
  retried: { type: 'integer', description: 'how many failed jobs were retried' },
  jobs: { type: 'array', items: { type: 'object', required: allRequired(bulkRetriedJobProperties), properties: bulkRetriedJobProperties } },
} as const satisfies SchemaProperties<BulkRetryAnswer>;

export const bulkRetrySchema = { type: 'object', required: allRequired(bulkRetryProperties), properties: bulkRetryProperties } as const;

const failureGroupProperties = {
  type: { type: 'string' },
  code: { type: 'string', description: 'the error code the jobs failed with' },
  count: { type: 'integer', description: 'failed jobs of this type and code not retried yet' },
  firstEndedAt: timeSchema,
  lastEndedAt: timeSchema,
  sampleJobId: { type: 'string', description: 'one job of the group' },
} as const satisfies SchemaProperties<FailureGroupView>;

const failuresProperties = {
  groups: { type: 'array', items: { type: 'object', required: allRequired(failureGroupProperties), properties: failureGroupProperties } },
} as const satisfies SchemaProperties<FailuresView>;

export const failuresSchema = { type: 'object', required: allRequired(failuresProperties), properties: failuresProperties } as const;
