import type { FastifyInstance } from 'fastify';
import type { FailedJobFilter } from '../../ledger/ledger.js';
import type { Orchestrator } from '../../orchestrator/orchestrator.js';
import { bulkRetrySchema, failuresSchema, retriedJobSchema, type BulkRetryAnswer, type FailuresView, type RetriedJobView } from '../../wire/redrive.js';
import { visibleTenant } from '../auth.js';
import { ApiError, ApiErrorCode, errorSchema, jobNotFound } from '../errors.js';
import type { KeyIdentity } from '../../keys/key-store.js';
import { isoTime } from '../job-view.js';
import { acceptEmptyBody, jobDetail, jobIdParams } from './jobs.js';

const nameSchema = { type: 'string', minLength: 1, maxLength: 64 } as const;
const timeFilter = { type: 'string', minLength: 1, maxLength: 64, description: 'an ISO 8601 time, e.g. 2026-12-01T09:00:00Z' } as const;

const timeRange = {
  endedAfter: { ...timeFilter, description: 'only jobs that ended at or after this ISO 8601 time' },
  endedBefore: { ...timeFilter, description: 'only jobs that ended before this ISO 8601 time' },
} as const;

const tenantFilter = { ...nameSchema, description: "admin keys only: one tenant's jobs instead of every tenant's" } as const;

interface TimeRange {
  endedAfter?: string;
  endedBefore?: string;
  tenant?: string;
}

interface BulkRetryBody extends TimeRange {
  type?: string;
  code?: string;
}

/**
 * Redrive and the holding area (issue 14). A failed job is never run again: a retry makes
 * a new job from it (new id, same type, input, tenant and options), linked both ways
 * (`retryOf`, `retriedBy` in `GET /v1/jobs/:id`), so each keeps its own result message.
 */
export function registerRedriveRoutes(scope: FastifyInstance, orchestrator: Orchestrator): void {
  const { ledger } = orchestrator;

  scope.post<{ Params: { id: string } }>(
    '/jobs/:id/retry',
    {
      schema: {
        summary: 'Retry a failed (or cancelled) job as a new job',
        description:
          'Answers 201 with the new job (`retryOf` names the failed one). Retrying a job retried before makes no second job: ' +
          'the answer is 200 with the job its first retry made (`created: false`). A job that did not fail is 409 `not_failed`.',
        tags: ['jobs'],
        params: jobIdParams,
        response: { 200: retriedJobSchema, 201: retriedJobSchema, 401: errorSchema, 404: errorSchema, 409: errorSchema, 429: errorSchema },
      },
      onRequest: acceptEmptyBody,
    },
    async (request, reply): Promise<RetriedJobView> => {
      const { id } = request.params;
      const result = await orchestrator.retry(id, visibleTenant(request.caller));
      if (result.outcome === 'refused') {
        if (result.reason === 'unknown_job' || !result.job) throw jobNotFound(id);
        const state = result.job.failureReason ? `${result.job.state}: ${result.job.failureReason}` : result.job.state;
        throw new ApiError(409, ApiErrorCode.notFailed, `job ${id} is ${state}: only a failed or cancelled job can be retried`);
      }
      void reply.code(result.created ? 201 : 200);
      return { ...(await jobDetail(ledger, result.job, orchestrator.clock.now())), created: result.created };
    },
  );

  scope.post<{ Body: BulkRetryBody | undefined }>(
    '/jobs/retry',
    {
      schema: {
        summary: 'Retry every failed job matching a filter',
        description:
          'Every failed job not retried yet that matches every filter given (type, error code, when it ended; cancelled jobs are left out) ' +
          'gets a new job, as `POST /v1/jobs/:id/retry` makes, in batches of one ledger transaction each. Without `endedBefore`, ' +
          'the jobs that ended before the request. Answers how many, and the jobs made.',
        tags: ['jobs'],
        body: {
          type: ['object', 'null'],
          additionalProperties: false,
          properties: {
            type: nameSchema,
            code: { ...nameSchema, maxLength: 128, description: 'the error code they failed with' },
            ...timeRange,
            tenant: tenantFilter,
          },
        },
        response: { 200: bulkRetrySchema, 400: errorSchema, 401: errorSchema, 429: errorSchema },
      },
      onRequest: acceptEmptyBody,
    },
    async (request): Promise<BulkRetryAnswer> => {
      const body = request.body ?? {};
      const filter: FailedJobFilter = {
        ...failedFilter(request.caller, body, 'body'),
        ...(body.type === undefined ? {} : { type: body.type }),
        ...(body.code === undefined ? {} : { code: body.code }),
      };
      const retried = await orchestrator.retryFailed(filter);
      return { retried: retried.length, jobs: retried.map(({ retryOf, job }) => ({ id: job.id, retryOf })) };
    },
  );
}

/** `GET /v1/failures`, the holding area (read only: outside the rate limit of the routes that create jobs). */
export function registerFailureRoutes(scope: FastifyInstance, orchestrator: Orchestrator): void {
  const { ledger } = orchestrator;
  scope.get<{ Querystring: TimeRange }>(
    '/failures',
    {
      schema: {
        summary: 'The holding area: failed jobs not retried yet, grouped by type and error code',
        description:
          'One line per (type, error code), largest first, with the first and last time one ended and one job to look at. Cancelled jobs are left out.',
        tags: ['jobs'],
        querystring: { type: 'object', additionalProperties: false, properties: { ...timeRange, tenant: tenantFilter } },
        response: { 200: failuresSchema, 400: errorSchema, 401: errorSchema },
      },
    },
    async (request): Promise<FailuresView> => {
      const groups = await ledger.listFailureGroups(failedFilter(request.caller, request.query, 'querystring'));
      return {
        groups: groups.map((g) => ({ ...g, firstEndedAt: isoTime(g.firstEndedAt), lastEndedAt: isoTime(g.lastEndedAt) })),
      };
    },
  );
}

/** The tenant and time range of a filter of failed jobs: a tenant key's own tenant, an admin's named one or every tenant. */
function failedFilter(caller: KeyIdentity, given: TimeRange, where: string): Pick<FailedJobFilter, 'tenant' | 'endedAfter' | 'endedBefore'> {
  const own = visibleTenant(caller);
  if (own !== undefined && given.tenant !== undefined) throw new ApiError(400, ApiErrorCode.invalidRequest, `${where} must NOT have property "tenant"`);
  const tenant = own ?? given.tenant;
  return {
    ...(tenant === undefined ? {} : { tenant }),
    ...(given.endedAfter === undefined ? {} : { endedAfter: parseTime(given.endedAfter, `${where}/endedAfter`) }),
    ...(given.endedBefore === undefined ? {} : { endedBefore: parseTime(given.endedBefore, `${where}/endedBefore`) }),
  };
}

function parseTime(text: string, field: string): number {
  const ms = Date.parse(text);
  if (Number.isNaN(ms))
    throw new ApiError(400, ApiErrorCode.invalidRequest, `${field} must be an ISO 8601 time (e.g. 2026-12-01T09:00:00Z), not ${JSON.stringify(text)}`);
  return ms;
}
