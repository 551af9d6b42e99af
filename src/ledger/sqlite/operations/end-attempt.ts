/**
 * The sweep's exits from running@n whose lease ran out (settle and release use the
 * shared operations/end-attempt.ts). Each is one guarded UPDATE keyed to (job, attempt,
 * lease token) and to the lease being expired; it returns false, changing nothing, when
 * the guard no longer holds. On success it closes the attempt's history row and writes
 * the outbox row that announces what happened, in the caller's transaction.
 *
 *   fail          running@n -> failed/<reason>     + failure message
 *   requeueExpired  running@n -> queued@n+1 after backoff for many expired leases at
 *                 once: one UPDATE per attempt number instead of one per lease
 */
import type { SerializedError } from '../../../core/errors.js';
import { backoffFor, type JobResult } from '../../ledger.js';
import { groupByAttempt } from '../../shared/lease-rules.js';
import type { AttemptOutcome, FailureReason } from '../../states.js';
import type { SqliteContext } from '../context.js';
import { type JobRow, selectJobById } from '../rows.js';
import { enqueueResult, enqueueWork } from './outbox.js';

/** Whether the exit requires the lease to be live (a settle) or expired (a sweep). */
export type LeaseExpectation = 'live' | 'expired';

const guard = `id = @jobId AND state = 'running' AND attempt = @attempt AND lease_token = @token
  AND CASE @expect WHEN 'live' THEN lease_deadline > @now ELSE lease_deadline <= @now END`;

const failSql = `UPDATE jobs SET state = 'failed', failure_reason = @reason, error_class = @errorClass,
    error_code = @errorCode, error_message = @errorMessage, lease_token = NULL, lease_deadline = NULL,
    ended_at = @now, updated_at = @now
  WHERE ${guard}`;

// The expired-lease guard of `guard`, for every job named in the JSON array @ids.
const requeueExpiredSql = `UPDATE jobs SET state = 'queued', attempt = attempt + 1, not_before = @notBefore,
    redispatch_at = @redispatchAt, lease_token = NULL, lease_holder = NULL, lease_deadline = NULL,
    progress = NULL, progress_message = NULL, updated_at = @now
  WHERE id IN (SELECT value FROM json_each(@ids)) AND state = 'running' AND attempt = @attempt AND lease_deadline <= @now`;

const closeExpiredAttempts = `UPDATE attempts SET ended_at = @now, outcome = 'expired', error = @error
  WHERE job_id IN (SELECT value FROM json_each(@ids)) AND attempt = @attempt AND ended_at IS NULL`;

const closeAttempt = `UPDATE attempts SET ended_at = @now, outcome = @outcome, error = @error
  WHERE job_id = @jobId AND attempt = @attempt AND ended_at IS NULL`;

interface Exit {
  row: JobRow;
  expect: LeaseExpectation;
}

function guardParams(ctx: SqliteContext, { row, expect }: Exit) {
  return { jobId: row.id, attempt: row.attempt, token: row.lease_token, expect, now: ctx.clock.now() };
}

function close(ctx: SqliteContext, row: JobRow, outcome: AttemptOutcome, error: SerializedError | null): void {
  ctx.sql(closeAttempt).run({
    jobId: row.id,
    attempt: row.attempt,
    outcome,
    error: error ? JSON.stringify(error) : null,
    now: ctx.clock.now(),
  });
}

export function fail(
  ctx: SqliteContext,
  exit: Exit,
  reason: FailureReason,
  error: SerializedError,
  outcome: AttemptOutcome,
): JobRow | undefined {
  const changed = ctx.sql(failSql).run({
    ...guardParams(ctx, exit),
    reason,
    errorClass: error.class,
    errorCode: error.code,
    errorMessage: error.message,
  }).changes;
  if (changed !== 1) return undefined;
  close(ctx, exit.row, outcome, error);
  const row = ctx.sql(selectJobById).get(exit.row.id) as JobRow;
  enqueueResult(ctx, row);
  return row;
}

/** What the sweep reads of an expired lease that goes back to the queue. */
export type ExpiredLease = Pick<JobRow, 'id' | 'attempt' | 'tenant' | 'type'>;

/**
 * `requeue` of many expired leases in one go: rows just read by the sweep, in its
 * transaction, every one running with its lease expired. A pass that expires 10,000
 * leases spent most of its time in per-row statements; grouped by attempt number (the
 * backoff depends on it) they are a handful of statements. Returns each job's new attempt.
 */
export function requeueExpired(ctx: SqliteContext, leases: readonly ExpiredLease[], error: SerializedError): Array<{ jobId: string; attempt: number }> {
  const now = ctx.clock.now();
  const requeued: Array<{ jobId: string; attempt: number }> = [];
  for (const [attempt, group] of groupByAttempt(leases)) {
    const ids = JSON.stringify(group.map((lease) => lease.id));
    const notBefore = now + backoffFor(ctx.config, attempt);
    const redispatchAt = notBefore + ctx.config.redispatchAfterMs;
    const changed = ctx.sql(requeueExpiredSql).run({ ids, attempt, now, notBefore, redispatchAt }).changes;
    // The rows were read in this transaction with the same guard: anything else is a bug, and rolls the sweep back.
    if (changed !== group.length) throw new Error(`planrun ledger: sweep requeued ${changed} of ${group.length} expired leases of attempt ${attempt}`);
    ctx.sql(closeExpiredAttempts).run({ ids, attempt, now, error: JSON.stringify(error) });
    for (const lease of group) {
      enqueueWork(ctx, { ...lease, attempt: attempt + 1 }, notBefore);
      requeued.push({ jobId: lease.id, attempt: attempt + 1 });
    }
  }
  return requeued;
}
