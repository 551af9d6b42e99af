import type { SerializedError } from '../../core/errors.js';
import type { AttemptRecord, FleetRecord, Job, JobResult, OutboxKind, OutboxMessage } from '../ledger.js';
import type { AttemptOutcome, FailureReason, JobState } from '../states.js';
import type { JobLimits } from '../../wire/jobs.js';

/** A row of `jobs` as SQLite returns it. */
export interface JobRow {
  seq: number;
  id: string;
  tenant: string;
  type: string;
  input: string;
  requires: string;
  idempotency_key: string | null;
  state: JobState;
  attempt: number;
  max_attempts: number;
  timeout_seconds: number | null;
  limits: string | null;
  priority: number;
  concurrency_key: string | null;
  concurrency_limit: number | null;
  dispatched_attempt: number | null;
  not_before: number;
  redispatch_at: number | null;
  lease_token: string | null;
  lease_holder: string | null;
  lease_deadline: number | null;
  cancel_requested: 0 | 1;
  progress: number | null;
  progress_message: string | null;
  result: string | null;
  failure_reason: FailureReason | null;
  error_class: SerializedError['class'] | null;
  error_code: string | null;
  error_message: string | null;
  error_log_tail: string | null;
  created_at: number;
  updated_at: number;
  started_at: number | null;
  ended_at: number | null;
}

export interface AttemptRow {
  job_id: string;
  attempt: number;
  worker: string;
  started_at: number;
  ended_at: number | null;
  outcome: AttemptOutcome | null;
  error: string | null;
}

export const selectJobById = 'SELECT * FROM jobs WHERE id = ?';

export function toJob(row: JobRow): Job {
  return {
    id: row.id,
    tenant: row.tenant,
    type: row.type,
    input: JSON.parse(row.input) as unknown,
    requires: JSON.parse(row.requires) as string[],
    idempotencyKey: row.idempotency_key,
    state: row.state,
    attempt: row.attempt,
    maxAttempts: row.max_attempts,
    timeoutSeconds: row.timeout_seconds,
    limits: row.limits === null ? null : (JSON.parse(row.limits) as JobLimits),
    priority: Number(row.priority),
    concurrencyKey: row.concurrency_key,
    concurrencyLimit: row.concurrency_limit,
    notBefore: row.not_before,
    leaseToken: row.lease_token,
    leaseHolder: row.lease_holder,
    leaseDeadline: row.lease_deadline,
    cancelRequested: row.cancel_requested === 1,
    progress: row.progress,
    progressMessage: row.progress_message,
    result: row.result === null ? null : (JSON.parse(row.result) as JobResult),
    failureReason: row.failure_reason,
    error:
      row.error_class === null
        ? null
        : {
            class: row.error_class,
            code: row.error_code ?? '',
            message: row.error_message ?? '',
            ...(row.error_log_tail === null ? {} : { logTail: row.error_log_tail }),
          },
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    startedAt: row.started_at,
    endedAt: row.ended_at,
  };
}

export function toAttempt(row: AttemptRow): AttemptRecord {
  return {
    jobId: row.job_id,
    attempt: row.attempt,
    worker: row.worker,
    startedAt: row.started_at,
    endedAt: row.ended_at,
    outcome: row.outcome,
    error: row.error === null ? null : (JSON.parse(row.error) as SerializedError),
  };
}

/** An outbox row as the relay's statements read it (the JSON text of its body). */
export interface OutboxRow {
  id: number;
  kind: OutboxKind;
  job_id: string;
  body: string;
  created_at: number;
  available_at: number;
}

export function toOutboxMessage(row: OutboxRow): OutboxMessage {
  return {
    id: row.id,
    kind: row.kind,
    jobId: row.job_id,
    createdAt: row.created_at,
    availableAt: row.available_at,
    body: JSON.parse(row.body) as unknown,
  } as OutboxMessage;
}

/** A fleet row (its report's lists as JSON text). */
export interface FleetRow {
  worker: string;
  proof: string;
  job_types: string;
  capabilities: string;
  held_back: string;
  slots: number;
  running: number;
  last_heartbeat: number;
}

export function toFleetRecord(row: FleetRow): FleetRecord {
  return {
    worker: row.worker,
    jobTypes: JSON.parse(row.job_types) as string[],
    capabilities: JSON.parse(row.capabilities) as string[],
    heldBack: JSON.parse(row.held_back) as FleetRecord['heldBack'],
    slots: row.slots,
    running: row.running,
    lastHeartbeat: row.last_heartbeat,
  };
}
