/**
 * The exits from running@n, shared by settle (the worker reports) and sweep (the lease
 * ran out). Each is one guarded UPDATE keyed to (job, attempt, lease token), to the cancel
 * flag the caller decided on, and to the lease being live (settle) or expired (sweep); it
 * returns undefined, changing nothing, when the guard no longer holds. On success it
 * closes the attempt's history row and writes the outbox row that announces what
 * happened, in the caller's transaction.
 *
 *   finish        running@n -> finished            + result message
 *   fail          running@n -> failed/<reason>     + failure message
 *   requeue       running@n -> queued@n+1 after backoff + work message due then
 *                 (a release: due at once, no backoff)
 *   requeueExpired  the same exit for many expired leases at once (the sweep): three
 *                 statements per attempt number instead of three round trips per lease
 */
import type { SerializedError } from '../../../core/errors.js';
import { backoffFor, type JobResult } from '../../ledger.js';
import { groupByAttempt } from '../../shared/lease-rules.js';
import type { AttemptOutcome, FailureReason } from '../../states.js';
import type { PgContext } from '../context.js';
import type { JobRow } from '../rows.js';
import { enqueueResult, enqueueWork, enqueueWorkMany } from './outbox.js';

/** Whether the exit requires the lease to be live (a settle) or expired (a sweep). */
export type LeaseExpectation = 'live' | 'expired';

export interface Exit {
  /** The running row as the caller read (and locked) it. */
  row: JobRow;
  expect: LeaseExpectation;
  now: number;
}

// $1 job, $2 attempt, $3 token, $4 now, $5 cancel_requested as decided on.
const guard = (expect: LeaseExpectation) =>
  `id = $1 AND state = 'running' AND attempt = $2 AND lease_token = $3 AND cancel_requested = $5
    AND lease_deadline ${expect === 'live' ? '>' : '<='} $4`;

const finishSql = (expect: LeaseExpectation) => `UPDATE jobs SET state = 'finished', result = $6, lease_token = NULL,
    lease_deadline = NULL, progress = 1, ended_at = $4, updated_at = $4
  WHERE ${guard(expect)}
  RETURNING *`;

const failSql = (expect: LeaseExpectation) => `UPDATE jobs SET state = 'failed', failure_reason = $6, error_class = $7,
    error_code = $8, error_message = $9, lease_token = NULL, lease_deadline = NULL, ended_at = $4, updated_at = $4
  WHERE ${guard(expect)}
  RETURNING *`;

const requeueSql = (expect: LeaseExpectation) => `UPDATE jobs SET state = 'queued', attempt = attempt + 1, not_before = $6,
    redispatch_at = $7, lease_token = NULL, lease_holder = NULL, lease_deadline = NULL,
    progress = NULL, progress_message = NULL, updated_at = $4
  WHERE ${guard(expect)}
  RETURNING *`;

const statements = {
  live: { finish: finishSql('live'), fail: failSql('live'), requeue: requeueSql('live') },
  expired: { finish: finishSql('expired'), fail: failSql('expired'), requeue: requeueSql('expired') },
};

// The expired-lease guard for every job of the array $1 (rows the sweep read and locked).
const requeueExpiredSql = `UPDATE jobs SET state = 'queued', attempt = attempt + 1, not_before = $3,
    redispatch_at = $4, lease_token = NULL, lease_holder = NULL, lease_deadline = NULL,
    progress = NULL, progress_message = NULL, updated_at = $5
  WHERE id = ANY($1::text[]) AND state = 'running' AND attempt = $2 AND lease_deadline <= $5 AND NOT cancel_requested`;

const closeExpiredAttempts = `UPDATE attempts SET ended_at = $3, outcome = 'expired', error = $4
  WHERE job_id = ANY($1::text[]) AND attempt = $2 AND ended_at IS NULL`;

const closeAttempt = `UPDATE attempts SET ended_at = $3, outcome = $4, error = $5
  WHERE job_id = $1 AND attempt = $2 AND ended_at IS NULL`;

function guardValues({ row, now }: Exit): unknown[] {
  return [row.id, row.attempt, row.lease_token, now, row.cancel_requested];
}

async function close(ctx: PgContext, exit: Exit, outcome: AttemptOutcome, error: SerializedError | null): Promise<void> {
  await ctx.run(closeAttempt, [exit.row.id, exit.row.attempt, exit.now, outcome, error ? JSON.stringify(error) : null]);
}

export async function fail(
  ctx: PgContext,
  exit: Exit,
  reason: FailureReason,
  error: SerializedError,
  outcome: AttemptOutcome,
): Promise<JobRow | undefined> {
  const row = await ctx.row<JobRow>(statements[exit.expect].fail, [
    ...guardValues(exit),
    reason,
    error.class,
    error.code,
    error.message,
  ]);
  if (!row) return undefined;
  await close(ctx, exit, outcome, error);
  await enqueueResult(ctx, row, exit.now);
  return row;
}

/** What the sweep reads of an expired lease that goes back to the queue. */
export type ExpiredLease = Pick<JobRow, 'id' | 'attempt' | 'tenant' | 'type'>;

/**
 * `requeue` of many expired leases in one go, for the sweep: rows it read and locked in
 * its transaction, each running with its lease expired and no cancel asked. Row by row a
 * 10,000-lease pass took about 10 s of round trips; grouped by attempt number (the
 * backoff depends on it) it is three statements per group. Returns each job's new attempt.
 */
export async function requeueExpired(
  ctx: PgContext,
  leases: readonly ExpiredLease[],
  error: SerializedError,
  now: number,
): Promise<Array<{ jobId: string; attempt: number }>> {
  const requeued: Array<{ jobId: string; attempt: number }> = [];
  for (const [attempt, group] of groupByAttempt(leases)) {
    const ids = group.map((lease) => lease.id);
    const notBefore = now + backoffFor(ctx.config, attempt);
    const redispatchAt = notBefore + ctx.config.redispatchAfterMs;
    const changed = await ctx.run(requeueExpiredSql, [ids, attempt, notBefore, redispatchAt, now]);
    // The rows were read and locked in this transaction with the same guard: anything else is a bug, and rolls the sweep back.
    if (changed !== group.length) throw new Error(`planrun ledger: sweep requeued ${changed} of ${group.length} expired leases of attempt ${attempt}`);
    await ctx.run(closeExpiredAttempts, [ids, attempt, now, JSON.stringify(error)]);
    await enqueueWorkMany(ctx, group.map((lease) => ({ ...lease, attempt: attempt + 1 })), now, notBefore);
    for (const id of ids) requeued.push({ jobId: id, attempt: attempt + 1 });
  }
  return requeued;
}
