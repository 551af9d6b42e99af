import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ApiError, ApiErrorCode } from './errors.js';

/** Whatever tells a key's tenant: the KeyStore, or any store with the same lookup. */
export interface KeyLookup {
  tenantOf(key: string): string | undefined | Promise<string | undefined>;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The tenant of the request's API key; set on every authenticated route. */
    tenant: string;
  }
}

const BEARER = /^Bearer +(\S+) *$/i;

/**
 * Requires `Authorization: Bearer KEY` on every route of `scope` and sets `request.tenant`
 * from the key. The tenant never comes from the request itself. Runs before the body is
 * read, so a caller without a key cannot make the server parse a large body. The scope's
 * routes are documented (OpenAPI) as needing the key.
 */
export function requireApiKey(scope: FastifyInstance, keys: KeyLookup): void {
  scope.addHook('onRoute', (route) => {
    route.schema = { ...route.schema, security: [{ apiKey: [] }] };
  });
  scope.decorateRequest('tenant', '');
  scope.addHook('onRequest', async (request: FastifyRequest) => {
    const header = request.headers.authorization;
    if (header === undefined) {
      throw new ApiError(401, ApiErrorCode.unauthorized, 'missing API key: send the header "Authorization: Bearer <key>"');
    }
    const key = BEARER.exec(header)?.[1];
    if (key === undefined) throw new ApiError(401, ApiErrorCode.unauthorized, 'the Authorization header must be "Bearer <key>"');
    const tenant = await keys.tenantOf(key);
    if (tenant === undefined) throw new ApiError(401, ApiErrorCode.unauthorized, 'unknown or revoked API key');
    request.tenant = tenant;
  });
}
