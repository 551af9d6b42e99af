import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiErrorCode } from './errors.js';

/**
 * The dashboard's static files as `npm run build` leaves them (Vite builds dashboard/ into
 * dist/dashboard/, next to dist/api/; the test build copies them to .build/src/dashboard/).
 */
export const dashboardDir = fileURLToPath(new URL('../dashboard/', import.meta.url));

/** Vite names every file in assets/ by its content hash: a changed file is a new name, so these never go stale. */
const hashedAssets = 'public, max-age=31536000, immutable';
/** index.html names the current assets: a browser asks again each time, so a new build is seen at once. */
const revalidate = 'no-cache';

/** Paths that belong to the API or the operators' endpoints: never answered with the dashboard's page. */
const notClientRoutes = /^\/(v1|metrics|healthz|readyz|openapi\.json)(\/|$|\?)/;

/**
 * Serves the dashboard at `/` (the API stays at `/v1`): its files, and index.html for any
 * other page a browser asks for (`/jobs/…`, `/failures`: the app routes them itself). The
 * files need no key; the app asks for one and sends it with each API request.
 *
 * Returns the not-found handler to install: API paths and non-page requests keep `apiNotFound`.
 */
export function serveDashboard(
  app: FastifyInstance,
  apiNotFound: (request: FastifyRequest, reply: FastifyReply) => FastifyReply,
): (request: FastifyRequest, reply: FastifyReply) => FastifyReply {
  if (!existsSync(join(dashboardDir, 'index.html'))) {
    app.log.warn({ dashboardDir }, 'the dashboard is not built (npm run build): / answers 404');
    return (request, reply) => {
      if (!wantsPage(request)) return apiNotFound(request, reply);
      return reply.status(404).send({
        error: { code: ApiErrorCode.notFound, message: `the dashboard is not built: no ${join(dashboardDir, 'index.html')} (run npm run build)` },
      });
    };
  }
  void app.register(fastifyStatic, {
    root: dashboardDir,
    // The API's own 404 answers paths that are no file; the handler below sends pages.
    wildcard: true,
    cacheControl: false,
    setHeaders: (response, path) => {
      response.setHeader('cache-control', path.startsWith(join(dashboardDir, 'assets')) ? hashedAssets : revalidate);
    },
  });
  return (request, reply) => {
    if (!wantsPage(request)) return apiNotFound(request, reply);
    return reply.header('cache-control', revalidate).sendFile('index.html');
  };
}

/** A browser navigating to one of the app's pages: a GET for HTML outside the API's paths. */
function wantsPage(request: FastifyRequest): boolean {
  if (request.method !== 'GET' && request.method !== 'HEAD') return false;
  if (notClientRoutes.test(request.url)) return false;
  return (request.headers.accept ?? '').includes('text/html');
}
