import type { FastifyInstance } from 'fastify';
import { ApiErrorCode, errorSchema } from '../errors.js';
import type { Readiness } from '../readiness.js';

/** Probes for load balancers and supervisors; they need no key. */
export function registerHealthRoutes(scope: FastifyInstance, readiness: Readiness): void {
  scope.get(
    '/healthz',
    {
      schema: {
        summary: 'The process is up',
        tags: ['health'],
        response: { 200: { type: 'object', properties: { status: { type: 'string', enum: ['ok'] } } } },
      },
    },
    async () => ({ status: 'ok' }),
  );

  scope.get(
    '/readyz',
    {
      schema: {
        summary: 'The ledger answers and the broker is connected',
        tags: ['health'],
        response: { 200: { type: 'object', properties: { status: { type: 'string', enum: ['ready'] } } }, 503: errorSchema },
      },
    },
    async (_request, reply) => {
      const problems = await readiness.problems();
      if (problems.length === 0) return { status: 'ready' };
      return reply.status(503).send({ error: { code: ApiErrorCode.unavailable, message: `not ready: ${problems.join('; ')}` } });
    },
  );
}
