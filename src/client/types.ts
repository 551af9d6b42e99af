/**
 * What the HTTP API sends and accepts, as the client types it. Times are ISO 8601
 * strings, as on the wire.
 */
import type { SerializedError } from '../core/errors.js';

export type JobState = 'queued' | 'running' | 'finished' | 'failed';
export type TerminalJobState = 'finished' | 'failed';
export type FailureReason = 'permanent' | 'exhausted' | 'cancelled' | 'unroutable' | (string & {});
export type AttemptOutcome = 'finished' | 'failed' | 'retried' | 'expired' | 'cancelled' | (string & {});

export function isTerminalState(state: string): state is TerminalJobState {
  return state === 'finished' || state === 'failed';
}

export interface JobResultView {
  data?: unknown;
  /** Output name -> where it was stored (a path or URL). */
  outputs?: Record<string, string>;
}

export interface AttemptView {
  attempt: number;
  worker: string;
  startedAt: string;
  endedAt: string | null;
  outcome: AttemptOutcome | null;
  error: SerializedError | null;
}

/** A job as `GET /v1/jobs` lists it. */
export interface JobSummary {
  id: string;
  type: string;
  tenant: string;
  state: JobState;
  /** The current (or last) attempt, from 1. */
  attempt: number;
  maxAttempts: number;
  requires: string[];
  idempotencyKey: string | null;
  /** A cancel was asked for while the job ran; its worker stops it at its next heartbeat. */
  cancelRequested: boolean;
  /** 0..1 as the running attempt last reported it, or null before it reported any. */
  progress: number | null;
  progressMessage: string | null;
  /** The settled attempt's data and where its outputs were stored. */
  result: JobResultView | null;
  error: SerializedError | null;
  /** Why a failed job failed. */
  reason: FailureReason | null;
  createdAt: string;
  updatedAt: string;
  startedAt: string | null;
  endedAt: string | null;
}

/** A job with its attempt history, as `GET /v1/jobs/:id` and `cancel` answer it. */
export interface JobView extends JobSummary {
  attempts: AttemptView[];
}

/** A job that has ended. */
export type TerminalJobView = JobView & { state: TerminalJobState };

export interface SubmitOptions {
  /** The same key (per tenant) always answers with the same job. */
  idempotencyKey?: string;
  /** Capabilities a worker needs to run it. */
  requires?: string[];
  maxAttempts?: number;
}

export interface JobSubmission extends SubmitOptions {
  type: string;
  input: unknown;
}

/** The answer to a submission: the job as it stands; `created` is false when the idempotency key named an existing job. */
export interface SubmittedJob extends JobSummary {
  created: boolean;
}

export interface ListOptions {
  state?: JobState;
  type?: string;
  cursor?: string;
  limit?: number;
}

export interface JobPage {
  jobs: JobSummary[];
  nextCursor: string | null;
}

export interface FleetWorker {
  id: string;
  jobTypes: string[];
  capabilities: string[];
  /** Job types it has but does not offer, each with the capabilities it lacks for it. */
  heldBack: Array<{ type: string; missing: string[] }>;
  /** Jobs it runs at once. */
  slots: number;
  /** Jobs it ran at its last heartbeat. */
  running: number;
  lastHeartbeat: string;
}

export interface FleetView {
  workers: FleetWorker[];
}

/**
 * One event of a job's stream, with the job as it stands: `state` when its state, attempt
 * or cancel request changed (and once on connect), `progress` when only its progress did.
 * The last event is a `state` event with a terminal state.
 */
export interface JobEvent {
  type: 'state' | 'progress';
  job: JobSummary;
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
