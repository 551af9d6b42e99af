import swagger from '@fastify/swagger';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Broker } from '../broker/broker.js';
import type { Orchestrator } from '../orchestrator/orchestrator.js';
import { version } from '../version.js';
import { requireApiKey, type KeyLookup } from './auth.js';
import { serveDashboard } from './dashboard.js';
import { handleError, handleNotFound } from './errors.js';
import { Readiness } from './readiness.js';
import { checkRequestHeaders } from './request-headers.js';
import { registerFleetRoutes } from './routes/fleet.js';
import { registerHealthRoutes } from './routes/health.js';
import { registerJobEventRoutes } from './routes/job-events.js';
import { registerJobLogRoutes } from './routes/job-logs.js';
import { registerJobRoutes } from './routes/jobs.js';
import { registerMetricsRoute } from './routes/metrics.js';
import { registerOutputRoutes } from './routes/outputs.js';
import { registerFailureRoutes, registerRedriveRoutes } from './routes/redrive.js';
import { registerSubmitRoutes } from './routes/submit.js';
import { registerUploadRoutes } from './routes/uploads.js';
import { defaultRateLimit, limitRequestsPerKey, type RateLimit } from './rate-limit.js';
import { OpenEventStreams } from './sse.js';
import { formatValidationError, refuseDeepBodies, useStrictValidation } from './validation.js';

export interface ApiLimits {
  /** Largest request body accepted; a larger one is answered 413. */
  bodyBytes: number;
  /** Most jobs in one `POST /v1/jobs/batch`. */
  batchJobs: number;
}

export const defaultApiLimits: ApiLimits = { bodyBytes: 1024 * 1024, batchJobs: 1000 };

export interface ApiOptions {
  orchestrator: Orchestrator;
  /** Tells who an API key acts for (the KeyStore). */
  keys: KeyLookup;
  /** The orchestrator's broker connection, watched for `GET /readyz`. */
  broker: Pick<Broker, 'onEvent'>;
  logger: Logger;
  limits?: Partial<ApiLimits>;
  /** How often an event stream sends a keep-alive comment (default 15 s). */
  eventHeartbeatMs?: number;
  /** How often a followed log (`?follow=1`) looks for new lines (default 250 ms). */
  logPollMs?: number;
  /**
   * Serve `GET /metrics` here, behind an API key (default true). False when a listener of
   * their own serves them (`--metrics-port`): then no tenant's key reads fleet-wide counts.
   */
  serveMetrics?: boolean;
  /** The folder store `GET /v1/jobs/:id/outputs/:name` may stream files from (outputs elsewhere on disk are not served). */
  outputDir?: string;
  /** Submissions (`POST /v1/jobs`, `/v1/jobs/batch`, `/v1/uploads`) per API key; `off` for none (default `defaultRateLimit`). */
  rateLimit?: RateLimit | 'off';
  /** Serve the dashboard at `/` (default true). */
  dashboard?: boolean;
}

/**
 * The orchestrator's HTTP API: `/v1/*` (every route needs `Authorization: Bearer KEY`,
 * and the key decides the tenant), `GET /metrics` (needs a key too), `/healthz`, `/readyz`,
 * `/openapi.json`, and the dashboard at `/` (static files; the app sends a key to `/v1`).
 *
 * Routes outside `/v1` can be added to the returned instance before it listens; they get
 * the error shape but no authentication.
 */
export function buildApi(options: ApiOptions): FastifyInstance {
  const limits = { ...defaultApiLimits, ...options.limits };
  // Typed as fastify's logger interface, which pino's implements, so that the instance has
  // the default type every route module takes.
  const logger: FastifyBaseLogger = options.logger;
  const app = Fastify({
    loggerInstance: logger,
    // Clients poll and stream; a log line per request would drown everything else.
    // Failures are still logged by the error handler.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: limits.bodyBytes,
    schemaErrorFormatter: formatValidationError,
    // Errors the router raises before any route runs (a malformed URL, a path parameter
    // over its length limit) get the same shape as every other error.
    frameworkErrors: handleError(limits.bodyBytes),
  });
  useStrictValidation(app);
  checkRequestHeaders(app);
  refuseDeepBodies(app);
  app.setErrorHandler(handleError(limits.bodyBytes));
  app.setNotFoundHandler((options.dashboard ?? true) ? serveDashboard(app, handleNotFound) : handleNotFound);

  const streams = new OpenEventStreams(options.eventHeartbeatMs ?? 15_000);
  // Open event streams would keep `close` waiting for their jobs to end: end them first.
  app.addHook('preClose', async () => streams.endAll());
  const readiness = new Readiness(options.orchestrator.ledger, options.broker);
  app.addHook('onClose', async () => readiness.stop());

  void app.register(swagger, {
    openapi: {
      info: { title: 'planrun', version, description: 'Long jobs over an at-least-once queue, each with an exactly-once effect.' },
      components: { securitySchemes: { apiKey: { type: 'http', scheme: 'bearer', description: 'an API key from `planrun keys create`' } } },
    },
  });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  // In a plugin so that they are added after swagger is loaded, which documents them.
  void app.register(async (root) => registerHealthRoutes(root, readiness));

  void app.register(
    async (v1) => {
      requireApiKey(v1, options.keys);
      // The routes that create something, in a scope of their own so that only they are rate limited.
      await v1.register(async (submission) => {
        const rateLimit = options.rateLimit ?? defaultRateLimit;
        if (rateLimit !== 'off') await limitRequestsPerKey(submission, rateLimit);
        registerSubmitRoutes(submission, options.orchestrator, limits);
        registerUploadRoutes(submission, options.orchestrator);
        registerRedriveRoutes(submission, options.orchestrator);
      });
      registerJobRoutes(v1, options.orchestrator);
      registerFailureRoutes(v1, options.orchestrator);
      registerOutputRoutes(v1, options.orchestrator, options.outputDir);
      registerJobEventRoutes(v1, options.orchestrator, streams, options.keys);
      registerJobLogRoutes(v1, options.orchestrator, streams, options.keys, options.logPollMs ?? 250);
      registerFleetRoutes(v1, options.orchestrator.fleet);
    },
    { prefix: '/v1' },
  );

  // Metrics are of every tenant together, so they never go to a caller without a key. A
  // tenant's key reads them: their per-type series name only types the fleet offers,
  // which `GET /v1/fleet` shows that key already.
  if (options.serveMetrics ?? true) {
    void app.register(async (operating) => {
      requireApiKey(operating, options.keys);
      registerMetricsRoute(operating, options.orchestrator.metrics);
    });
  }
  return app;
}
