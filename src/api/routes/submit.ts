import type { FastifyInstance } from 'fastify';
import type { SubmitParams, SubmitResult } from '../../ledger/ledger.js';
import type { JobLimits } from '../../wire/jobs.js';
import type { Orchestrator } from '../../orchestrator/orchestrator.js';
import { dispatchParams, type DispatchFields } from '../../submission/dispatch-fields.js';
import { idempotencyKeySchema, inputProblem, submissionProperties, tenantNameProblem } from '../../submission/rules.js';
import { submittedBatchSchema, submittedJobSchema, type SubmittedBatch, type SubmittedJob } from '../../wire/jobs.js';
import { submittingTenant } from '../auth.js';
import { ApiError, ApiErrorCode, errorSchema } from '../errors.js';
import { toSubmittedJob } from '../job-view.js';

// Job types and capabilities become words of routing keys and queue names, and inputs
// go on to job processes: both paths of submission hold them to the same rules
// (src/submission/rules.ts); the submit queue refuses what is refused here.
// An admin key names the tenant a job is for; a tenant key submits for its own (see auth.ts).
export const namedTenantSchema = {
  type: 'string',
  minLength: 1,
  maxLength: 64,
  description: 'the tenant the job is for: required with an admin key, refused with a tenant key',
} as const;

const submissionSchema = {
  type: 'object',
  required: ['type', 'input'],
  additionalProperties: false,
  properties: { ...submissionProperties, tenant: namedTenantSchema },
} as const;

const batchItemSchema = {
  type: 'object',
  required: ['type', 'input'],
  additionalProperties: false,
  properties: { ...submissionProperties, tenant: namedTenantSchema, idempotencyKey: idempotencyKeySchema },
} as const;

interface Submission extends DispatchFields {
  type: string;
  input: unknown;
  requires?: string[];
  maxAttempts?: number;
  timeoutSeconds?: number;
  limits?: JobLimits;
  tenant?: string;
}

interface BatchItem extends Submission {
  idempotencyKey?: string;
}

// 415: a charset other than UTF-8, or a Content-Encoding (request-headers.ts).
const rejections = { 400: errorSchema, 401: errorSchema, 409: errorSchema, 413: errorSchema, 415: errorSchema } as const;

/**
 * `POST /v1/jobs` and `POST /v1/jobs/batch`. Both answer 202: the job is recorded, and
 * runs later. A repeated idempotency key answers 202 too, with the job it named first
 * (`created: false`), so a client retrying after a lost answer sees the same answer. A
 * job no worker of the fleet can run is accepted and fails at once: 202, state `failed`,
 * reason `unroutable`, its error naming what is missing.
 */
export function registerSubmitRoutes(scope: FastifyInstance, orchestrator: Orchestrator, limits: { batchJobs: number }): void {
  scope.post<{ Body: Submission; Headers: { 'idempotency-key'?: string } }>(
    '/jobs',
    {
      schema: {
        summary: 'Submit a job',
        tags: ['jobs'],
        headers: { type: 'object', properties: { 'idempotency-key': idempotencyKeySchema } },
        body: submissionSchema,
        response: { 202: submittedJobSchema, ...rejections },
      },
    },
    async (request, reply) => {
      const { type, input, requires, maxAttempts, timeoutSeconds, limits } = request.body;
      const tenant = submittingTenant(request.caller, request.body.tenant, 'body');
      refuseBreakingRules([[tenant, input, 'body/input']]);
      const idempotencyKey = request.headers['idempotency-key'];
      const dispatch = dispatchParams(request.body, 'body');
      const result = await orchestrator.submit({ tenant, type, input, requires, maxAttempts, timeoutSeconds, limits, idempotencyKey, ...dispatch });
      return reply.status(202).header('location', `/v1/jobs/${result.job.id}`).send(submitted(result, orchestrator.clock.now()));
    },
  );

  // Like BullMQ's addBulk: one transaction, one answer per job in the order sent. The
  // batch is validated whole first: one invalid item rejects it all with a 400 naming the
  // item (`body/jobs/3/type must be string`), so no batch is ever half recorded.
  scope.post<{ Body: { jobs: BatchItem[] } }>(
    '/jobs/batch',
    {
      schema: {
        summary: 'Submit many jobs at once',
        tags: ['jobs'],
        body: {
          type: 'object',
          required: ['jobs'],
          additionalProperties: false,
          properties: { jobs: { type: 'array', minItems: 1, maxItems: limits.batchJobs, items: batchItemSchema } },
        },
        response: { 202: submittedBatchSchema, ...rejections },
      },
    },
    async (request, reply) => {
      const tenants = request.body.jobs.map((job, index) => submittingTenant(request.caller, job.tenant, `body/jobs/${index}`));
      refuseBreakingRules(request.body.jobs.map((job, index) => [tenants[index]!, job.input, `body/jobs/${index}/input`]));
      const params: SubmitParams[] = request.body.jobs.map((job, index) => ({
        tenant: tenants[index]!,
        type: job.type,
        input: job.input,
        requires: job.requires,
        maxAttempts: job.maxAttempts,
        timeoutSeconds: job.timeoutSeconds,
        limits: job.limits,
        idempotencyKey: job.idempotencyKey,
        ...dispatchParams(job, `body/jobs/${index}`),
      }));
      const results = await orchestrator.submitMany(params);
      const now = orchestrator.clock.now();
      const answer: SubmittedBatch = { jobs: results.map((result) => submitted(result, now)) };
      return reply.status(202).send(answer);
    },
  );
}

/**
 * The rules the schema cannot say: the input's size and nesting, and the tenant's name
 * (an admin names it; a tenant key made before the rule existed must not get round it).
 */
function refuseBreakingRules(jobs: Array<[tenant: string, input: unknown, where: string]>): void {
  const problem = jobs.map(([tenant, input, where]) => tenantNameProblem(tenant) ?? inputProblem(input, where)).find((p) => p !== undefined);
  if (problem) throw new ApiError(400, ApiErrorCode.invalidRequest, problem);
}

function submitted(result: SubmitResult, now: number): SubmittedJob {
  return toSubmittedJob(result.job, result.created, now);
}
