import type { FastifyInstance } from 'fastify';
import type { OrchestratorMetrics } from '../../orchestrator/metrics.js';
import { errorSchema } from '../errors.js';

/**
 * `GET /metrics`, the Prometheus text format. On the API port it sits behind an API key
 * (see `buildApi`); on the metrics listener it needs none.
 */
export function registerMetricsRoute(scope: FastifyInstance, metrics: Pick<OrchestratorMetrics, 'render'>): void {
  scope.get(
    '/metrics',
    {
      schema: {
        summary: 'Prometheus metrics of the whole orchestrator',
        description:
          'Jobs by state, leases, retries, the outbox and latency histograms, for every tenant together. Per-type series are labelled `type` only for job types the fleet offers; every other type counts as `type="_other"`.',
        tags: ['operating'],
        produces: ['text/plain'],
        response: { 200: { type: 'string', description: 'Prometheus text exposition format' }, 401: errorSchema },
      },
    },
    async (_request, reply) => {
      const { contentType, body } = await metrics.render();
      return reply.type(contentType).send(body);
    },
  );
}
