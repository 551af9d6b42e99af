/**
 * Checks of what callers hand the ledger, for every driver (nothing here knows of SQL or
 * of a driver's rows). Each refusal is a LedgerError invalid_input naming the field.
 *
 * NUL characters: PostgreSQL cannot keep U+0000 in a text column, so no driver keeps one.
 *   - in a name a caller chose (tenant, type, idempotency key, worker id, an error's code,
 *     a listing's tenant or type filter): refused, invalid_input naming the field;
 *   - in free text that job code wrote (an error's message and stack, a progress message): each NUL
 *     is replaced by U+FFFD, so that a settle never fails for what a job printed.
 * JSON values (input, requires, result, whole errors in the history) are kept as JSON text,
 * where a NUL is the escape `\u0000`, and round-trip unchanged.
 */
import { boundedLogTail, boundedStack, isSerializedError, type SerializedError } from '../../core/errors.js';
import { maxLogLineChars, type LogEntry } from '../../wire/logs.js';
import { LedgerError, LedgerErrorCode } from '../errors.js';
import type { FailedJobFilter, LedgerConfig, ListJobsParams, ReleaseParams, SettleOutcome, SettleParams, SubmitParams } from '../ledger.js';
import type { NullableFilter } from '../operations/statements.js';
import { JobState } from '../states.js';

const NUL = '\u0000';
/** What a NUL in free text becomes: the Unicode replacement character. */
export const NUL_REPLACEMENT = '\uFFFD';

function invalid(message: string): LedgerError {
  return new LedgerError(LedgerErrorCode.invalidInput, message);
}

/** Refuses a NUL in a name; anything but a string is left to the caller's other checks. */
function refuseNul(field: string, value: unknown): void {
  if (typeof value === 'string' && value.includes(NUL)) throw invalid(`${field} must not contain a NUL character`);
}

/** Free text as the ledger keeps it: every NUL replaced by U+FFFD. */
export function recordableText(text: string): string {
  return text.includes(NUL) ? text.replaceAll(NUL, NUL_REPLACEMENT) : text;
}

/**
 * An error as the ledger keeps it (a settle's or a reject's): its code must hold no NUL,
 * NULs in its message and its stack are replaced, a stack is cut to its bound. Returned
 * unchanged (the same object) when there was nothing to change.
 */
export function recordableError(error: SerializedError): SerializedError {
  refuseNul('error code', error.code);
  const stack = typeof error.stack === 'string' ? recordableText(boundedStack(error.stack)) : undefined;
  const logTail = typeof error.logTail === 'string' ? recordableText(boundedLogTail(error.logTail)) : undefined;
  const messageChanges = typeof error.message === 'string' && error.message.includes(NUL);
  if (!messageChanges && stack === error.stack && logTail === error.logTail) return error;
  const recordable: SerializedError = { ...error, message: messageChanges ? recordableText(error.message) : error.message };
  if (stack === undefined) delete recordable.stack;
  else recordable.stack = stack;
  if (logTail === undefined) delete recordable.logTail;
  else recordable.logTail = logTail;
  return recordable;
}

const logStreams = new Set(['stdout', 'stderr', 'log']);

/**
 * Log lines as the ledger keeps them: each checked for its shape (invalid_input naming the
 * line otherwise), its message cut at maxLogLineChars and each NUL replaced, as in any free
 * text job code wrote. Fields are JSON, kept as given.
 */
export function recordableLogLines(lines: readonly LogEntry[]): LogEntry[] {
  const given: unknown = lines;
  if (!Array.isArray(given)) throw invalid('lines must be a list');
  return (given as unknown[]).map((value, i): LogEntry => {
    if (typeof value !== 'object' || value === null) throw invalid(`lines[${i}] must be an object`);
    const line = value as Record<string, unknown>;
    const { at, stream, message, fields } = line;
    if (typeof at !== 'number' || !Number.isSafeInteger(at) || at < 0) throw invalid(`lines[${i}].at must be a time in milliseconds`);
    if (typeof stream !== 'string' || !logStreams.has(stream)) throw invalid(`lines[${i}].stream must be stdout, stderr or log`);
    if (typeof message !== 'string') throw invalid(`lines[${i}].message must be a string`);
    if (fields !== undefined && (typeof fields !== 'object' || fields === null || Array.isArray(fields))) {
      throw invalid(`lines[${i}].fields must be an object when given`);
    }
    const kept = recordableText(message.length > maxLogLineChars ? message.slice(0, maxLogLineChars) : message);
    return {
      at,
      stream: stream as LogEntry['stream'],
      message: kept,
      ...(fields === undefined ? {} : { fields: fields as Record<string, unknown> }),
    };
  });
}

/** A submission checked and normalised: input and requires as JSON text, requires sorted and unique. */
export interface ValidSubmission {
  tenant: string;
  type: string;
  input: string;
  requires: string;
  idempotencyKey: string | null;
  maxAttempts: number;
  timeoutSeconds: number | null;
  /** As JSON text, keys in a fixed order; null when not given. */
  limits: string | null;
}

export function validateSubmission(params: SubmitParams, defaultMaxAttempts: number): ValidSubmission {
  if (typeof params !== 'object' || params === null) throw invalid('submission must be an object');
  const { tenant, type, requires = [], idempotencyKey, maxAttempts = defaultMaxAttempts, timeoutSeconds, limits } = params;
  if (typeof tenant !== 'string' || tenant.length === 0) throw invalid('tenant must be a non-empty string');
  refuseNul('tenant', tenant);
  if (typeof type !== 'string' || type.length === 0) throw invalid('type must be a non-empty string');
  refuseNul('type', type);
  if (!Array.isArray(requires) || !requires.every((r) => typeof r === 'string' && r.length > 0)) {
    throw invalid('requires must be a list of non-empty strings');
  }
  if (idempotencyKey !== undefined && (typeof idempotencyKey !== 'string' || idempotencyKey.length === 0)) {
    throw invalid('idempotencyKey must be a non-empty string when given');
  }
  refuseNul('idempotencyKey', idempotencyKey);
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1) throw invalid('maxAttempts must be an integer of at least 1');
  if (timeoutSeconds !== undefined && (!Number.isSafeInteger(timeoutSeconds) || timeoutSeconds < 1)) {
    throw invalid('timeoutSeconds must be a whole number of seconds of at least 1 when given');
  }
  if (limits !== undefined) refuseBadLimits(limits);
  let input: string | undefined;
  try {
    input = JSON.stringify(params.input ?? null);
  } catch (error) {
    throw invalid(`input must be JSON-serialisable: ${(error as Error).message}`);
  }
  if (input === undefined) throw invalid('input must be JSON-serialisable');
  return {
    tenant,
    type,
    input,
    requires: JSON.stringify([...new Set(requires)].sort()),
    idempotencyKey: idempotencyKey ?? null,
    maxAttempts,
    timeoutSeconds: timeoutSeconds ?? null,
    limits: limits === undefined ? null : JSON.stringify({ memoryMb: limits.memoryMb, processes: limits.processes }),
  };
}

function refuseBadLimits(limits: unknown): void {
  if (typeof limits !== 'object' || limits === null || Array.isArray(limits)) throw invalid('limits must be an object { memoryMb?, processes? } when given');
  const entries = Object.entries(limits);
  if (entries.length === 0) throw invalid('limits must name at least one of memoryMb, processes');
  for (const [name, value] of entries) {
    if (name !== 'memoryMb' && name !== 'processes') throw invalid(`limits has unknown property ${JSON.stringify(name)} (it has memoryMb, processes)`);
    if (!Number.isSafeInteger(value) || (value as number) < 1) throw invalid(`limits.${name} must be a whole number of at least 1`);
  }
}

/** The id a worker asks for a lease under (kept as the lease holder and in the history). */
export function validateWorkerId(worker: unknown): void {
  refuseNul('worker', worker);
}

/** The outcome a settle records: checked, and a failure's error made recordable (see above). */
export function validateSettleOutcome(params: SettleParams): SettleOutcome {
  const outcome = params.outcome as { kind?: unknown; result?: unknown; error?: unknown } | undefined;
  if (outcome?.kind === 'finished') {
    if (typeof outcome.result !== 'object' || outcome.result === null) throw invalid('a finished settle needs a result object');
    return params.outcome;
  }
  if (outcome?.kind === 'failed' && isSerializedError(outcome.error)) {
    const error = recordableError(outcome.error);
    return error === outcome.error ? params.outcome : { kind: 'failed', error };
  }
  throw invalid('settle outcome must be {kind:"finished", result} or {kind:"failed", error:{class, code, message}}');
}

export function validateReleaseError(params: ReleaseParams): SerializedError {
  if (!isSerializedError(params.error)) throw invalid('a release needs the error it records: {class, code, message}');
  return recordableError(params.error);
}

export function validateProgressFraction(fraction: unknown): void {
  if (typeof fraction !== 'number' || !(fraction >= 0 && fraction <= 1)) {
    throw invalid(`progress fraction must be a number from 0 to 1, got ${String(fraction)}`);
  }
}

/** The progress message to keep: null when none, NULs replaced (job code wrote it). */
export function recordableProgressMessage(message: string | undefined): string | null {
  return typeof message === 'string' ? recordableText(message) : (message ?? null);
}

export function validateConfig(config: LedgerConfig): LedgerConfig {
  if (config.dispatch !== 'fair' && config.dispatch !== 'fifo') throw invalid(`ledger config dispatch must be fair or fifo, got ${String(config.dispatch)}`);
  for (const [name, value] of Object.entries(config)) {
    if (name === 'dispatch') continue;
    if (name === 'grantWindowMs' && value === null) continue;
    if (name === 'grantWindowMs' && !(Number.isInteger(value) && value >= 1)) {
      throw invalid(`ledger config grantWindowMs must be a whole number of milliseconds >= 1, or null, got ${value}`);
    }
    if (!Number.isInteger(value) || value < (name === 'defaultMaxAttempts' ? 1 : 0)) {
      throw invalid(`ledger config ${name} must be a non-negative integer, got ${value}`);
    }
  }
  return config;
}

/** The page size of a listing (default 50, at most 1000); throws on a bad size, state or filter. */
export function validateListParams(params: ListJobsParams): number {
  const limit = params.limit ?? 50;
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw invalid('limit must be an integer from 1 to 1000');
  if (params.state !== undefined && !Object.values(JobState).includes(params.state)) {
    throw invalid(`state must be one of ${Object.values(JobState).join(', ')}`);
  }
  refuseNul('tenant', params.tenant);
  refuseNul('type', params.type);
  return limit;
}

/** A filter of failed jobs as a statement binds it (every filter null when not given); throws on a NUL in a name or a time that is not one. */
export function validateFailedJobFilter(filter: FailedJobFilter): NullableFilter {
  refuseNul('tenant', filter.tenant);
  refuseNul('type', filter.type);
  refuseNul('code', filter.code);
  for (const field of ['endedAfter', 'endedBefore'] as const) {
    const value = filter[field];
    if (value !== undefined && !Number.isSafeInteger(value)) throw invalid(`${field} must be a time in whole milliseconds since the epoch`);
  }
  return {
    tenant: filter.tenant ?? null,
    type: filter.type ?? null,
    code: filter.code ?? null,
    endedAfter: filter.endedAfter ?? null,
    endedBefore: filter.endedBefore ?? null,
  };
}

/** A batch size: an integer from 1 to `max`. */
export function validateBatchLimit(limit: number, max: number): number {
  if (!Number.isInteger(limit) || limit < 1 || limit > max) throw invalid(`limit must be an integer from 1 to ${max}`);
  return limit;
}
