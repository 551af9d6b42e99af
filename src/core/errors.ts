/**
 * The three error classes a job can end with. The class decides what happens next:
 * permanent fails the job once, transient requeues it for another attempt, fatal stops
 * the worker. Classification always goes through the serialisable `errorClass` and
 * `code`, never `instanceof` alone, because errors cross child processes and the broker.
 */
export const ErrorClass = {
  permanent: 'permanent',
  transient: 'transient',
  fatal: 'fatal',
} as const;
export type ErrorClass = (typeof ErrorClass)[keyof typeof ErrorClass];

/** What every error looks like once it has crossed a process or network boundary. */
export interface SerializedError {
  class: ErrorClass;
  code: string;
  message: string;
  /**
   * The stack of an error job code threw that is none of the three classes (most often a
   * bug), so it can be found: at most MAX_ERROR_STACK_LENGTH characters, the top frames.
   * A planrun error carries none: its class and code already say what happened.
   */
  stack?: string;
  /**
   * The last lines the attempt's job printed (stdout, stderr and ctx.log, at most
   * MAX_ERROR_LOG_TAIL_LINES lines and MAX_ERROR_STACK_LENGTH characters), added by the
   * worker to the error of a run that failed, so a crash says what the job said last.
   */
  logTail?: string;
}

/** Most lines of a job's log kept in its error's `logTail`. */
export const MAX_ERROR_LOG_TAIL_LINES = 20;

/** Most characters of a stack kept with an error: the top frames, where a bug shows. */
export const MAX_ERROR_STACK_LENGTH = 4096;

const STACK_CUT_MARK = '\n    [...the stack goes on: cut at 4096 characters]';

/** A stack cut to at most MAX_ERROR_STACK_LENGTH characters; one within the bound comes back unchanged. */
export function boundedStack(stack: string): string {
  if (stack.length <= MAX_ERROR_STACK_LENGTH) return stack;
  let kept = stack.slice(0, MAX_ERROR_STACK_LENGTH - STACK_CUT_MARK.length);
  // Never end on half of a surrogate pair.
  if (/[\uD800-\uDBFF]$/.test(kept)) kept = kept.slice(0, -1);
  return kept + STACK_CUT_MARK;
}

// Symbol.for survives duplicate copies of the package and other realms (as in Temporal's SDK).
const jobErrorMarker = Symbol.for('planrun.JobError');

export abstract class JobError extends Error {
  abstract readonly errorClass: ErrorClass;
  readonly code: string;
  readonly [jobErrorMarker] = true;

  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }

  toJSON(): SerializedError {
    return { class: this.errorClass, code: this.code, message: this.message };
  }
}

/** The same input will fail the same way every time: the job fails once. */
export class PermanentError extends JobError {
  readonly errorClass = ErrorClass.permanent;
  override readonly name = 'PermanentError';
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
  }
}

/** The machine or the network had a bad moment: the job goes back in line. */
export class TransientError extends JobError {
  readonly errorClass = ErrorClass.transient;
  override readonly name = 'TransientError';
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
  }
}

/** The worker itself is broken: it stops taking work and exits to restart clean. */
export class FatalError extends JobError {
  readonly errorClass = ErrorClass.fatal;
  override readonly name = 'FatalError';
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
  }
}

export function isJobError(value: unknown): value is JobError {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[jobErrorMarker] === true;
}

/**
 * The documented default: an error thrown by job code that is not one of the three
 * classes is treated as transient (code `unclassified`), so a bug that depends on the
 * environment gets another chance, and `maxAttempts` bounds the waste of one that doesn't.
 */
export const UNCLASSIFIED_CODE = 'unclassified';

export function serializeError(error: unknown): SerializedError {
  if (isJobError(error)) return error.toJSON();
  if (isSerializedError(error)) return { class: error.class, code: error.code, message: error.message, ...stackOf(error.stack), ...logTailOf(error.logTail) };
  const message = error instanceof Error ? error.message : String(error);
  return { class: ErrorClass.transient, code: UNCLASSIFIED_CODE, message, ...stackOf(error instanceof Error ? error.stack : undefined) };
}

function logTailOf(logTail: unknown): { logTail?: string } {
  return typeof logTail === 'string' && logTail !== '' ? { logTail: boundedLogTail(logTail) } : {};
}

/** A log tail cut to its bounds, keeping its end: the last lines are the ones that say why. */
export function boundedLogTail(logTail: string): string {
  const lines = logTail.split('\n').slice(-MAX_ERROR_LOG_TAIL_LINES).join('\n');
  if (lines.length <= MAX_ERROR_STACK_LENGTH) return lines;
  let kept = lines.slice(-MAX_ERROR_STACK_LENGTH);
  // Never start on the second half of a surrogate pair.
  if (/^[\uDC00-\uDFFF]/.test(kept)) kept = kept.slice(1);
  return kept;
}

function stackOf(stack: unknown): { stack?: string } {
  return typeof stack === 'string' && stack !== '' ? { stack: boundedStack(stack) } : {};
}

export function isSerializedError(value: unknown): value is SerializedError {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  return (v.class === 'permanent' || v.class === 'transient' || v.class === 'fatal') && typeof v.code === 'string' && typeof v.message === 'string';
}

/** Rebuilds a throwable error from its wire form, keeping class and code. */
export function deserializeError(error: SerializedError): JobError {
  switch (error.class) {
    case 'permanent':
      return new PermanentError(error.code, error.message);
    case 'transient':
      return new TransientError(error.code, error.message);
    case 'fatal':
      return new FatalError(error.code, error.message);
  }
}
