/**
 * Every failure the client reports is a PlanrunApiError whose `code` says what happened,
 * so callers branch on `error.code`, never on message text. Codes the API sends travel
 * unchanged (with the HTTP status); the client adds its own for failures that never got
 * an answer from the API (status 0).
 */
import { ApiErrorCode as ServerErrorCode } from '../api/error-codes.js';

export const ApiErrorCode = {
  ...ServerErrorCode,
  // The client's own (status 0): no usable answer came back.
  /** The server could not be reached (connection refused or reset, DNS, TLS). */
  unreachable: 'unreachable',
  /** The request, or `wait`, ran out of time. */
  timeout: 'timeout',
  /** An answer came back that does not follow the API's contract. */
  invalidResponse: 'invalid_response',
  /** A downloaded output's size or sha256 is not the one its result names: nothing was kept under its name. */
  outputMismatch: 'output_mismatch',
} as const;
export type ApiErrorCode = (typeof ApiErrorCode)[keyof typeof ApiErrorCode];

/** The codes above, or any other code a newer server sends. */
export type PlanrunErrorCode = ApiErrorCode | (string & {});

const codeByStatus: Record<number, ApiErrorCode> = {
  400: ApiErrorCode.invalidRequest,
  401: ApiErrorCode.unauthorized,
  403: ApiErrorCode.unauthorized,
  404: ApiErrorCode.notFound,
  409: ApiErrorCode.conflict,
  413: ApiErrorCode.payloadTooLarge,
  415: ApiErrorCode.unsupportedMediaType,
  500: ApiErrorCode.internal,
  503: ApiErrorCode.unavailable,
};

export class PlanrunApiError extends Error {
  override readonly name = 'PlanrunApiError';
  /** The HTTP status, or 0 when no answer came back. */
  readonly status: number;
  readonly code: PlanrunErrorCode;
  /** The URL of the request that failed. */
  readonly url: string;

  constructor(params: { status: number; code: PlanrunErrorCode; message: string; url: string; cause?: unknown }) {
    super(params.message, params.cause === undefined ? undefined : { cause: params.cause });
    this.status = params.status;
    this.code = params.code;
    this.url = params.url;
  }

  /** The error an HTTP answer describes: `{error: {code, message}}`, or its status alone. */
  static fromResponse(status: number, body: unknown, url: string): PlanrunApiError {
    const error = (body as { error?: { code?: unknown; message?: unknown } } | null)?.error;
    const code = typeof error?.code === 'string' ? error.code : (codeByStatus[status] ?? `http_${status}`);
    const message = typeof error?.message === 'string' ? error.message : `HTTP ${status} from ${url}`;
    return new PlanrunApiError({ status, code, message, url });
  }
}

export function isPlanrunApiError(value: unknown): value is PlanrunApiError {
  return value instanceof PlanrunApiError || (value instanceof Error && value.name === 'PlanrunApiError' && 'code' in value);
}
