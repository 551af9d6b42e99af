import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { Orchestrator } from '../../orchestrator/orchestrator.js';
import { uploadGrantSchema, uploadRequestSchema, type UploadGrant, type UploadRequest } from '../../wire/uploads.js';
import { submittingTenant } from '../auth.js';
import { tenantNameProblem } from '../../submission/rules.js';
import { ApiError, ApiErrorCode, errorSchema } from '../errors.js';

/** How long the presigned PUT `POST /v1/uploads` answers stays valid. */
export const uploadUrlTtlMs = 60 * 60_000;

/**
 * `POST /v1/uploads`: a presigned PUT for one file of the caller's tenant, at
 * `<prefix>/<tenant>/uploads/<random id>/<name>`, and the `s3://` location a job's input
 * names it by (see docs/storage.md, "Inputs by URL"). The bytes go straight to the object
 * store; an orchestrator without one answers 409 `no_object_store`.
 */
export function registerUploadRoutes(scope: FastifyInstance, orchestrator: Orchestrator, now: () => number = Date.now): void {
  scope.post<{ Body: UploadRequest }>(
    '/uploads',
    {
      schema: {
        summary: 'A presigned PUT URL to upload one input file to the object store',
        tags: ['uploads'],
        body: uploadRequestSchema,
        response: { 200: uploadGrantSchema, 400: errorSchema, 401: errorSchema, 409: errorSchema },
      },
    },
    async (request): Promise<UploadGrant> => {
      const store = orchestrator.objectStore;
      if (!store) {
        throw new ApiError(
          409,
          ApiErrorCode.noObjectStore,
          'this orchestrator has no object store (--store) to upload to; on one machine, name the file by its path instead',
        );
      }
      const tenant = submittingTenant(request.caller, request.body.tenant, 'body');
      const problem = tenantNameProblem(tenant);
      if (problem) throw new ApiError(400, ApiErrorCode.invalidRequest, problem);
      const key = store.uploadKeyOf(tenant, randomUUID(), request.body.name);
      const issuedAt = now();
      const url = await store.presignUpload(key, request.body.bytes, uploadUrlTtlMs);
      return { location: store.locationOf(key), url, expiresAt: new Date(issuedAt + uploadUrlTtlMs).toISOString() };
    },
  );
}
