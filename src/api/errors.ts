import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { LedgerError, LedgerErrorCode } from '../ledger/errors.js';
import { bodyTooLarge } from '../submission/rules.js';
import { ApiErrorCode } from './error-codes.js';

/** Every error the API answers has one shape, `{ error: { code, message } }`. */
export { ApiErrorCode };

export class ApiError extends Error {
  override readonly name = 'ApiError';
  constructor(
    readonly statusCode: number,
    readonly code: ApiErrorCode,
    message: string,
  ) {
    super(message);
  }
}

export function jobNotFound(jobId: string): ApiError {
  // The same answer for a job that does not exist and for another tenant's: a tenant
  // cannot even learn that an id is taken.
  return new ApiError(404, ApiErrorCode.notFound, `no job ${jobId}`);
}

export interface ErrorBody {
  error: { code: ApiErrorCode; message: string };
}

/** The OpenAPI description of every error answer. */
export const errorSchema = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message'],
      properties: { code: { type: 'string' }, message: { type: 'string' } },
    },
  },
} as const;

const codeByStatus: Record<number, ApiErrorCode> = {
  400: ApiErrorCode.invalidRequest,
  401: ApiErrorCode.unauthorized,
  404: ApiErrorCode.notFound,
  409: ApiErrorCode.conflict,
  413: ApiErrorCode.payloadTooLarge,
  415: ApiErrorCode.unsupportedMediaType,
  429: ApiErrorCode.rateLimited,
  503: ApiErrorCode.unavailable,
};

/** Turns whatever a route or fastify threw into a status and the one error body. */
export function toErrorAnswer(error: unknown, bodyLimitBytes: number): { status: number; body: ErrorBody } {
  if (error instanceof ApiError) return answer(error.statusCode, error.code, error.message);
  if (error instanceof LedgerError) {
    // Bad input the schema let through (e.g. a cursor this ledger never issued) is the
    // caller's; anything else from the ledger means it cannot answer right now.
    if (error.code === LedgerErrorCode.invalidInput) return answer(400, ApiErrorCode.invalidRequest, error.message);
    if (error.code === LedgerErrorCode.idempotencyConflict) return answer(409, ApiErrorCode.idempotencyConflict, error.message);
    return answer(503, ApiErrorCode.unavailable, `the ledger cannot answer: ${error.message}`);
  }
  const fastifyError = error as Partial<FastifyError>;
  if (fastifyError.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
    return answer(413, ApiErrorCode.payloadTooLarge, bodyTooLarge(bodyLimitBytes));
  }
  const status = fastifyError.statusCode;
  // Fastify's own client errors (validation, malformed JSON, wrong content type) carry a
  // status and a message fit to show; validation messages name the field.
  if (status !== undefined && status >= 400 && status < 500) {
    return answer(status, codeByStatus[status] ?? ApiErrorCode.invalidRequest, fastifyError.message ?? 'invalid request');
  }
  return answer(500, ApiErrorCode.internal, 'internal error; the orchestrator log has the details');
}

function answer(status: number, code: ApiErrorCode, message: string): { status: number; body: ErrorBody } {
  return { status, body: { error: { code, message } } };
}

/** Fastify's error handler: logs what is not the caller's fault, answers in the one shape. */
export function handleError(bodyLimitBytes: number) {
  return (error: unknown, request: FastifyRequest, reply: FastifyReply): FastifyReply => {
    const { status, body } = toErrorAnswer(error, bodyLimitBytes);
    if (status >= 500) request.log.error({ err: error, method: request.method, url: request.url }, 'request failed');
    if (status === 401) void reply.header('www-authenticate', 'Bearer');
    return reply.status(status).send(body);
  };
}

export function handleNotFound(request: FastifyRequest, reply: FastifyReply): FastifyReply {
  return reply.status(404).send({ error: { code: ApiErrorCode.notFound, message: `no route ${request.method} ${request.url.split('?')[0]}` } });
}
