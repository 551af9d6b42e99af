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
export { defineJobType, type JobContext, type JobRunResult, type JobType } from './worker/runner/job-type.js';
export type { JobState, FailureReason } from './ledger/states.js';
export type { Job } from './ledger/ledger.js';
export type { JobResult, ResultMessage } from './wire/jobs.js';
export type { OutputFile } from './wire/outputs.js';
export { Client, type UploadedFile, type UploadOptions } from './client/client.js';
export { ApiErrorCode, PlanrunApiError, isPlanrunApiError, type PlanrunErrorCode } from './client/errors.js';
export type {
  AttemptView,
  BulkRetriedJob,
  BulkRetryAnswer,
  ClientOptions,
  EventsOptions,
  FailedJobsFilter,
  FailureGroupView,
  FleetView,
  FleetWorker,
  JobEvent,
  JobPage,
  JobResultView,
  JobSubmission,
  JobSummary,
  JobView,
  ListOptions,
  LogDrop,
  LogLine,
  LogStream,
  LogsOptions,
  ReconnectOptions,
  RetriedJobView,
  SubmitOptions,
  SubmittedJob,
  TerminalJobView,
  WaitOptions,
} from './client/types.js';
