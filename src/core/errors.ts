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
  if (isSerializedError(error)) return { class: error.class, code: error.code, message: error.message };
  const message = error instanceof Error ? error.message : String(error);
  return { class: ErrorClass.transient, code: UNCLASSIFIED_CODE, message };
}

export function isSerializedError(value: unknown): value is SerializedError {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  return (
    (v.class === 'permanent' || v.class === 'transient' || v.class === 'fatal') &&
    typeof v.code === 'string' &&
    typeof v.message === 'string'
  );
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
