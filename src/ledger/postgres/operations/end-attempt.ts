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
 */
import type { SerializedError } from '../../../core/errors.js';
import { backoffFor, type JobResult } from '../../ledger.js';
import type { AttemptOutcome, FailureReason } from '../../states.js';
import type { PgContext } from '../context.js';
import type { JobRow } from '../rows.js';
import { enqueueResult, enqueueWork } from './outbox.js';

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

const closeAttempt = `UPDATE attempts SET ended_at = $3, outcome = $4, error = $5
  WHERE job_id = $1 AND attempt = $2 AND ended_at IS NULL`;

function guardValues({ row, now }: Exit): unknown[] {
  return [row.id, row.attempt, row.lease_token, now, row.cancel_requested];
}

async function close(ctx: PgContext, exit: Exit, outcome: AttemptOutcome, error: SerializedError | null): Promise<void> {
  await ctx.run(closeAttempt, [exit.row.id, exit.row.attempt, exit.now, outcome, error ? JSON.stringify(error) : null]);
}

export async function finish(ctx: PgContext, exit: Exit, result: JobResult): Promise<JobRow | undefined> {
  const row = await ctx.row<JobRow>(statements[exit.expect].finish, [...guardValues(exit), JSON.stringify(result)]);
  if (!row) return undefined;
  await close(ctx, exit, 'finished', null);
  await enqueueResult(ctx, row, exit.now);
  return row;
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

export async function requeue(ctx: PgContext, exit: Exit, outcome: AttemptOutcome, error: SerializedError): Promise<JobRow | undefined> {
  const notBefore = exit.now + backoffFor(ctx.config, exit.row.attempt);
  const redispatchAt = notBefore + ctx.config.redispatchAfterMs;
  const row = await ctx.row<JobRow>(statements[exit.expect].requeue, [...guardValues(exit), notBefore, redispatchAt]);
  if (!row) return undefined;
  await close(ctx, exit, outcome, error);
  await enqueueWork(ctx, row, exit.now, notBefore);
  return row;
}
