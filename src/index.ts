/** planrun's public surface: what job-type modules and apps import. */
export {
  ErrorClass,
  FatalError,
  JobError,
  PermanentError,
  TransientError,
  UNCLASSIFIED_CODE,
  deserializeError,
  isJobError,
  serializeError,
  type SerializedError,
} from './core/errors.js';
export type { JobState, FailureReason } from './ledger/states.js';
export type { Job, JobResult, ResultMessage } from './ledger/ledger.js';
