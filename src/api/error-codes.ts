/**
 * The codes of the API's errors (`{ error: { code, message } }`), shared by the server
 * and the client: callers branch on `code`, which is stable; `message` is for people.
 */
export const ApiErrorCode = {
  invalidRequest: 'invalid_request',
  unauthorized: 'unauthorized',
  notFound: 'not_found',
  conflict: 'conflict',
  /** An `Idempotency-Key` seen before came with another body. */
  idempotencyConflict: 'idempotency_conflict',
  /** `POST /v1/jobs/:id/retry` of a job that did not fail (queued, running or finished): only a failed (or cancelled) job can be retried. */
  notFailed: 'not_failed',
  payloadTooLarge: 'payload_too_large',
  unsupportedMediaType: 'unsupported_media_type',
  unavailable: 'unavailable',
  /** `POST /v1/uploads` to an orchestrator without an object store. */
  noObjectStore: 'no_object_store',
  /** More submissions with one key than `--rate-limit` allows: retry after `Retry-After` seconds. */
  rateLimited: 'rate_limited',
  internal: 'internal_error',
} as const;
export type ApiErrorCode = (typeof ApiErrorCode)[keyof typeof ApiErrorCode];
