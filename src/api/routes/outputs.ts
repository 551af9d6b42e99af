import { createReadStream } from 'node:fs';
import { realpath, stat } from 'node:fs/promises';
import { basename, isAbsolute, resolve, sep } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Orchestrator } from '../../orchestrator/orchestrator.js';
import { visibleTenant } from '../auth.js';
import { ApiError, ApiErrorCode, errorSchema, jobNotFound } from '../errors.js';

/** How long the presigned GET a redirect names stays valid. */
export const downloadUrlTtlMs = 5 * 60_000;

/**
 * `GET /v1/jobs/:id/outputs/:name`: one output of a finished job. For the S3 store, a 302 to
 * a short-lived presigned GET (the bytes never pass through the orchestrator); for the
 * folder store, the file itself, when it lies in the folder this orchestrator can read
 * (`outputDir`). Another tenant's job is answered 404, as a missing one.
 */
export function registerOutputRoutes(scope: FastifyInstance, orchestrator: Orchestrator, outputDir: string | undefined): void {
  scope.get<{ Params: { id: string; '*': string } }>(
    '/jobs/:id/outputs/*',
    {
      schema: {
        summary: 'One output of a finished job: a redirect to the object store, or the file',
        tags: ['jobs'],
        params: {
          type: 'object',
          required: ['id', '*'],
          properties: {
            id: { type: 'string', minLength: 1, maxLength: 100 },
            '*': { type: 'string', minLength: 1, maxLength: 1024, description: 'the output name' },
          },
        },
        response: { 401: errorSchema, 404: errorSchema },
      },
    },
    async (request, reply) => {
      const { id } = request.params;
      const name = request.params['*'];
      const job = await orchestrator.ledger.getJob(id, visibleTenant(request.caller));
      if (!job) throw jobNotFound(id);
      const location = job.state === 'finished' ? job.result?.outputs?.[name] : undefined;
      if (location === undefined || !Object.hasOwn(job.result?.outputs ?? {}, name)) {
        throw new ApiError(
          404,
          ApiErrorCode.notFound,
          `job ${id} has no output ${JSON.stringify(name)}${job.state === 'finished' ? '' : ` (it is ${job.state})`}`,
        );
      }
      if (location.startsWith('s3://')) {
        const store = orchestrator.objectStore;
        const key = store?.keyOfLocation(location);
        if (!store || key === undefined)
          throw new ApiError(404, ApiErrorCode.notFound, `output ${JSON.stringify(name)} is in ${location}, outside this orchestrator's store`);
        return reply.redirect(await store.presignDownload(key, downloadUrlTtlMs), 302);
      }
      const path = await readablePath(location, outputDir);
      if (!path)
        throw new ApiError(
          404,
          ApiErrorCode.notFound,
          `output ${JSON.stringify(name)} is on a worker's disk (${location}), not in this orchestrator's output folder`,
        );
      const { size } = await stat(path);
      return reply
        .type('application/octet-stream')
        .header('content-length', size)
        .header('content-disposition', `attachment; filename="${basename(name).replace(/["\\]/g, '_')}"`)
        .send(createReadStream(path));
    },
  );
}

/** A folder-store location, if it is a regular file inside `root` (links followed). */
async function readablePath(location: string, root: string | undefined): Promise<string | undefined> {
  if (!root) return undefined;
  const path = location.startsWith('file://') ? new URL(location).pathname : location;
  if (!isAbsolute(path)) return undefined;
  try {
    const [real, realRoot] = await Promise.all([realpath(path), realpath(resolve(root))]);
    if (!real.startsWith(realRoot + sep)) return undefined;
    return (await stat(real)).isFile() ? real : undefined;
  } catch {
    return undefined;
  }
}
