import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Job, Ledger } from '../../ledger/ledger.js';
import type { JobState } from '../../ledger/states.js';
import type { Orchestrator } from '../../orchestrator/orchestrator.js';
import { jobPageSchema, jobViewSchema, type JobPage, type JobView } from '../../wire/jobs.js';
import { visibleTenant } from '../auth.js';
import { ApiError, ApiErrorCode, errorSchema, jobNotFound } from '../errors.js';
import { toJobSummary, toJobView } from '../job-view.js';

export const jobIdParams = {
  type: 'object',
  required: ['id'],
  // 100 characters is the router's limit on a path parameter (a job id is a 36-character UUID).
  properties: { id: { type: 'string', minLength: 1, maxLength: 100 } },
} as const;

const listQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    state: { type: 'string', enum: ['queued', 'running', 'finished', 'failed'], description: 'the ledger state: a scheduled job is listed with queued' },
    type: { type: 'string', minLength: 1, maxLength: 64 },
    cursor: { type: 'string', minLength: 1, maxLength: 256, description: 'the nextCursor of the page before' },
    limit: { type: 'integer', minimum: 1, maximum: 1000, default: 50 },
    tenant: { type: 'string', minLength: 1, maxLength: 64, description: "admin keys only: one tenant's jobs instead of every tenant's" },
  },
} as const;

interface ListQuery {
  state?: JobState;
  type?: string;
  cursor?: string;
  limit: number;
  tenant?: string;
}

/** A job as `GET /v1/jobs/:id` shows it: with its attempts and its retry links. */
export async function jobDetail(ledger: Ledger, job: Job, now: number): Promise<JobView> {
  const [attempts, links, waitingFor] = await Promise.all([ledger.getAttempts(job.id), ledger.getRetryLinks(job.id), ledger.waitingFor(job.id)]);
  return toJobView(job, attempts, links, waitingFor, now);
}

/**
 * For a POST that takes no body (cancel, retry): `curl -H 'Content-Type: application/json'
 * -X POST` sends an empty one with that type, which the JSON parser would refuse, though
 * there is nothing to parse.
 */
export async function acceptEmptyBody(request: FastifyRequest): Promise<void> {
  if (Number(request.headers['content-length'] ?? 0) === 0 && !request.headers['transfer-encoding']) {
    delete request.headers['content-type'];
  }
}

/**
 * Reading, listing and cancelling jobs: a tenant key's own tenant's, where another
 * tenant's job is answered 404, as a missing one; an admin key's, every tenant's.
 */
export function registerJobRoutes(scope: FastifyInstance, orchestrator: Orchestrator): void {
  const { ledger } = orchestrator;
  const detail = (job: Job) => jobDetail(ledger, job, orchestrator.clock.now());

  scope.get<{ Params: { id: string } }>(
    '/jobs/:id',
    {
      schema: {
        summary: 'A job: its state, progress, result or error, and every attempt',
        tags: ['jobs'],
        params: jobIdParams,
        response: { 200: jobViewSchema, 401: errorSchema, 404: errorSchema },
      },
    },
    async (request) => {
      const job = await ledger.getJob(request.params.id, visibleTenant(request.caller));
      if (!job) throw jobNotFound(request.params.id);
      return detail(job);
    },
  );

  scope.get<{ Querystring: ListQuery }>(
    '/jobs',
    {
      schema: {
        summary: "The tenant's jobs (an admin key: every tenant's), newest first, a page at a time",
        tags: ['jobs'],
        querystring: listQuery,
        response: { 200: jobPageSchema, 400: errorSchema, 401: errorSchema },
      },
    },
    async (request): Promise<JobPage> => {
      const { tenant, ...query } = request.query;
      const own = visibleTenant(request.caller);
      if (own !== undefined && tenant !== undefined) {
        throw new ApiError(400, ApiErrorCode.invalidRequest, 'querystring must NOT have property "tenant"');
      }
      const page = await ledger.listJobs({ ...query, tenant: own ?? tenant });
      const now = orchestrator.clock.now();
      return { jobs: page.jobs.map((job) => toJobSummary(job, now)), nextCursor: page.nextCursor };
    },
  );

  // A queued job fails as cancelled at once; a running one is marked `cancelRequested`
  // and its worker stops it at its next heartbeat. A job that already ended cannot be.
  scope.post<{ Params: { id: string } }>(
    '/jobs/:id/cancel',
    {
      schema: {
        summary: 'Cancel a job',
        tags: ['jobs'],
        params: jobIdParams,
        response: { 200: jobViewSchema, 401: errorSchema, 404: errorSchema, 409: errorSchema },
      },
      onRequest: acceptEmptyBody,
    },
    async (request) => {
      // An admin cancels in the job's own tenant, which only the job tells.
      const tenant = visibleTenant(request.caller) ?? (await ledger.getJob(request.params.id))?.tenant;
      if (tenant === undefined) throw jobNotFound(request.params.id);
      const result = await orchestrator.cancel(request.params.id, tenant);
      if (result.outcome !== 'refused') return detail(result.job);
      if (result.reason === 'unknown_job' || !result.job) throw jobNotFound(request.params.id);
      const ended = result.job.failureReason ? `${result.job.state}: ${result.job.failureReason}` : result.job.state;
      throw new ApiError(409, ApiErrorCode.conflict, `job ${request.params.id} already ended (${ended})`);
    },
  );
}
