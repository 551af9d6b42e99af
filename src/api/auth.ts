import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { KeyIdentity } from '../keys/key-store.js';
import { ApiError, ApiErrorCode } from './errors.js';

/** Whatever tells who a key acts for: the KeyStore, or any store with the same lookups. */
export interface KeyLookup {
  identify(key: string): KeyIdentity | undefined | Promise<KeyIdentity | undefined>;
  /** Whether the key with this id still works: open event streams ask, so a revoked key's stream ends. */
  isActive(id: string): boolean | Promise<boolean>;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Who the request's API key acts for; set on every authenticated route. */
    caller: KeyIdentity;
  }
}

const BEARER = /^Bearer +(\S+) *$/i;

/**
 * Requires `Authorization: Bearer KEY` on every route of `scope` and sets `request.caller`
 * from the key. A tenant never comes from the request itself, except that an admin key
 * names the tenant it submits for (`submittingTenant`). Runs before the body is read, so
 * a caller without a key cannot make the server parse a large body. The scope's routes
 * are documented (OpenAPI) as needing the key.
 */
export function requireApiKey(scope: FastifyInstance, keys: KeyLookup): void {
  scope.addHook('onRoute', (route) => {
    route.schema = { ...route.schema, security: [{ apiKey: [] }] };
  });
  // Null until the hook below sets it or refuses the request (fastify takes no object as a
  // decoration's initial value; the cast because its types do not model null for this one).
  scope.decorateRequest('caller', null as never);
  scope.addHook('onRequest', async (request: FastifyRequest) => {
    const header = request.headers.authorization;
    if (header === undefined) {
      throw new ApiError(401, ApiErrorCode.unauthorized, 'missing API key: send the header "Authorization: Bearer <key>"');
    }
    const key = BEARER.exec(header)?.[1];
    if (key === undefined) throw new ApiError(401, ApiErrorCode.unauthorized, 'the Authorization header must be "Bearer <key>"');
    const caller = await keys.identify(key);
    if (caller === undefined) throw new ApiError(401, ApiErrorCode.unauthorized, 'unknown or revoked API key');
    request.caller = caller;
  });
}

/** The tenant whose jobs the caller sees: its own for a tenant key, undefined (every tenant) for an admin key. */
export function visibleTenant(caller: KeyIdentity): string | undefined {
  return caller.kind === 'tenant' ? caller.tenant : undefined;
}

/**
 * The tenant a submission or an upload is for. A tenant key's own, and it may not name
 * one (that field is an admin's; the refusal reads as it did before admin keys, when the
 * schema had no such field); an admin key must name one, in `tenant` of the object at `where`.
 */
export function submittingTenant(caller: KeyIdentity, named: string | undefined, where: string): string {
  if (caller.kind === 'tenant') {
    if (named !== undefined) throw new ApiError(400, ApiErrorCode.invalidRequest, `${where} must NOT have property "tenant"`);
    return caller.tenant;
  }
  if (named === undefined) {
    throw new ApiError(400, ApiErrorCode.invalidRequest, `${where} must have property "tenant" with an admin key: name the tenant the job is for`);
  }
  return named;
}
