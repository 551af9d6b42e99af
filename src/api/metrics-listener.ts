import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { OrchestratorMetrics } from '../orchestrator/metrics.js';
import { handleError, handleNotFound } from './errors.js';
import { registerMetricsRoute } from './routes/metrics.js';

/**
 * `GET /metrics` alone, for a listener of its own (`--metrics-port`). It takes no key, so
 * that Prometheus scrapes it with no credential to manage: who can reach it is decided by
 * where it listens (127.0.0.1 unless `--metrics-host` says otherwise), as for any exporter.
 */
export function buildMetricsListener(metrics: Pick<OrchestratorMetrics, 'render'>, logger: Logger): FastifyInstance {
  // The cast picks Fastify's logger type, so the instance is the plain FastifyInstance this returns.
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion
  const app = Fastify({ loggerInstance: logger as FastifyBaseLogger, logController: new LogController({ disableRequestLogging: true }) });
  // No route reads a body: 0 refuses any.
  app.setErrorHandler(handleError(0));
  app.setNotFoundHandler(handleNotFound);
  registerMetricsRoute(app, metrics);
  return app;
}
