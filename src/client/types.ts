/**
 * What the client sends and is answered, as it types it. The shapes the API answers with
 * (a job, its attempts and result, a page, the fleet, an event) are declared once, with
 * the schemas the API serialises them through, in src/wire/: they are re-exported here
 * under the names the client has always given them.
 */
import type { AttemptOutcomeView, FailureReasonView, JobEvent, JobLimits, JobResult, JobState, TerminalJobState } from '../wire/jobs.js';

export type { AttemptView, JobEvent, JobPage, JobState, JobSummary, JobView, SubmittedJob, TerminalJobState, TerminalJobView } from '../wire/jobs.js';
export type { FleetView, FleetWorker } from '../wire/fleet.js';
export type { BulkRetriedJob, BulkRetryAnswer, FailureGroupView, FailuresView, RetriedJobView } from '../wire/redrive.js';
export type { OutputFile } from '../wire/outputs.js';

/** Why a failed job failed (open: a newer server may name a reason this version does not). */
export type FailureReason = FailureReasonView;
/** How an attempt ended (open: a newer server may name an outcome this version does not). */
export type AttemptOutcome = AttemptOutcomeView;
/** The settled attempt's data and where its outputs were stored. */
export type JobResultView = JobResult;

export function isTerminalState(state: string): state is TerminalJobState {
  return state === 'finished' || state === 'failed';
}

export interface SubmitOptions {
  /** The same key (per tenant) always answers with the same job. */
  idempotencyKey?: string;
  /** Capabilities a worker needs to run it. */
  requires?: string[];
  maxAttempts?: number;
  /** How long one run may take, in whole seconds (default: the job type's, else the worker's). */
  timeoutSeconds?: number;
  /** Resource limits of one run; they can only lower the job type's own. */
  limits?: JobLimits;
  /** Higher first among the tenant's waiting jobs of the type (default 0). */
  priority?: number;
  /** At most concurrencyLimit (default 1) of the tenant's jobs with this key run at once. */
  concurrencyKey?: string;
  concurrencyLimit?: number;
  /** Not started before this ISO 8601 time (with its zone), or delaySeconds from now. */
  runAt?: string;
  delaySeconds?: number;
}

export interface JobSubmission extends SubmitOptions {
  type: string;
  input: unknown;
}

export interface ListOptions {
  state?: JobState;
  type?: string;
  cursor?: string;
  limit?: number;
}

/** Which failed jobs a bulk retry takes (every filter given must match); times as Date or ISO 8601 strings. */
export interface FailedJobsFilter {
  type?: string;
  /** The error code they failed with. */
  code?: string;
  /** Ended at or after. */
  endedAfter?: Date | string;
  /** Ended before (a bulk retry: the request's time when not given). */
  endedBefore?: Date | string;
  /** An admin key only: one tenant's (else every tenant's). */
  tenant?: string;
}

export interface ClientOptions {
  /** Where the API listens, e.g. `http://127.0.0.1:7700`. */
  url: string;
  /** An API key; it names the tenant. */
  key: string;
  /** The fetch to use (default: the global one). */
  fetch?: typeof fetch;
  /** How long one request may take before it fails with code `timeout` (default 30 s). */
  timeoutMs?: number;
  /** How `events` and `wait` ride out a server that goes away for a while. */
  reconnect?: Partial<ReconnectOptions>;
}

export interface ReconnectOptions {
  /** First pause before reconnecting or polling again; doubles up to `maxDelayMs` (default 250 ms). */
  initialDelayMs: number;
  /** Default 2 s. */
  maxDelayMs: number;
  /** Give up, with the last error, once the server has been unreachable this long in a row (default 30 s). */
  giveUpAfterMs: number;
  /** A stream silent this long (the server sends a keep-alive every 15 s) is presumed dead and reopened (default 60 s). */
  idleTimeoutMs: number;
}

export interface WaitOptions {
  signal?: AbortSignal;
  /** Fails with code `timeout` if the job has not ended by then (default: no limit). */
  timeoutMs?: number;
  /** Told of every event on the way (synthesised from polls while the stream is down). */
  onEvent?: (event: JobEvent) => void;
}

export interface EventsOptions {
  signal?: AbortSignal;
}

export interface LogsOptions {
  /** Which attempt, from 1 (default: the job's latest). */
  attempt?: number;
  signal?: AbortSignal;
}

export type { LogDrop, LogLine, LogStream } from '../wire/logs.js';
