/**
 * The ledger's named statements (operations/statements.ts says what each must do) in
 * PostgreSQL's dialect, each one round trip on the write's connection (or the pool, for
 * a read). Several orchestrators may share the database: a plan that decides from a row
 * reads it with lockJob (FOR UPDATE), and every change is still a guarded UPDATE whose
 * row count or RETURNING row decides.
 */
import type { Job } from '../ledger.js';
import type { AsyncLedgerStatements, StatementParams as Params } from '../operations/plan.js';
import type { AttemptGuard, LeaseExpectation } from '../operations/statements.js';
import type { PgContext } from './context.js';
import { type JobRow, lockJobById, selectJobById, toJob } from './rows.js';

// $1 job, $2 attempt, $3 token, $4 now: the live, uncancelled lease.
const liveLease = `id = $1 AND state = 'running' AND attempt = $2 AND lease_token = $3
    AND lease_deadline > $4 AND NOT cancel_requested`;

const grantLease = `UPDATE jobs SET state = 'running', lease_token = $4, lease_holder = $3, lease_proof = $7,
    lease_deadline = $5, redispatch_at = NULL, started_at = COALESCE(started_at, $6), updated_at = $6
  WHERE id = $1 AND state = 'queued' AND attempt = $2 AND not_before <= $6
  RETURNING *`;
const regrantLease = `UPDATE jobs SET lease_deadline = $4, updated_at = $5
  WHERE id = $1 AND state = 'running' AND attempt = $2 AND lease_holder = $3
    AND lease_proof = $6 AND lease_deadline > $5 AND NOT cancel_requested
  RETURNING *`;
const insertAttempt = 'INSERT INTO attempts (job_id, attempt, worker, started_at) VALUES ($1, $2, $3, $4)';

// AttemptGuard, the exits from running@n: $1 job, $2 attempt, $3 token, $4 now, $5 cancel_requested
// as decided on; one statement per expectation, so that each has a plain plan.
const attemptGuard = (expect: LeaseExpectation) =>
  `id = $1 AND state = 'running' AND attempt = $2 AND lease_token = $3 AND cancel_requested = $5
    AND lease_deadline ${expect === 'live' ? '>' : '<='} $4`;
const finishAttempt = (expect: LeaseExpectation) => `UPDATE jobs SET state = 'finished', result = $6, lease_token = NULL,
    lease_deadline = NULL, progress = 1, ended_at = $4, updated_at = $4
  WHERE ${attemptGuard(expect)}`;
const failAttempt = (expect: LeaseExpectation) => `UPDATE jobs SET state = 'failed', failure_reason = $6, error_class = $7,
    error_code = $8, error_message = $9, lease_token = NULL, lease_deadline = NULL, ended_at = $4, updated_at = $4
  WHERE ${attemptGuard(expect)}`;
const requeueAttempt = (expect: LeaseExpectation) => `UPDATE jobs SET state = 'queued', attempt = attempt + 1, not_before = $6,
    redispatch_at = $7, lease_token = NULL, lease_holder = NULL, lease_deadline = NULL,
    progress = NULL, progress_message = NULL, updated_at = $4
  WHERE ${attemptGuard(expect)}`;
const exits = {
  live: { finish: finishAttempt('live'), fail: failAttempt('live'), requeue: requeueAttempt('live') },
  expired: { finish: finishAttempt('expired'), fail: failAttempt('expired'), requeue: requeueAttempt('expired') },
};
const closeAttempt = `UPDATE attempts SET ended_at = $3, outcome = $4, error = $5
  WHERE job_id = $1 AND attempt = $2 AND ended_at IS NULL`;

const insertOutbox = 'INSERT INTO outbox (kind, job_id, body, created_at, available_at) VALUES ($1, $2, $3, $4, $5)';

const extendLease = `UPDATE jobs SET lease_deadline = $5, updated_at = $4 WHERE ${liveLease}`;
const updateProgress = `UPDATE jobs SET progress = $5, progress_message = $6, updated_at = $4 WHERE ${liveLease}`;

export class PgStatements implements AsyncLedgerStatements {
  constructor(private readonly ctx: PgContext) {}

  /** The one row `sql` answers (a SELECT, or a change RETURNING *), as a Job. */
  private async job(sql: string, values: unknown[]): Promise<Job | undefined> {
    const row = await this.ctx.row<JobRow>(sql, values);
    return row && toJob(row);
  }

  selectJob({ jobId }: { jobId: string }): Promise<Job | undefined> {
    return this.job(selectJobById, [jobId]);
  }

  lockJob({ jobId }: { jobId: string }): Promise<Job | undefined> {
    return this.job(lockJobById, [jobId]);
  }

  grantLease(p: Params<'grantLease'>): Promise<Job | undefined> {
    return this.job(grantLease, [p.jobId, p.attempt, p.worker, p.token, p.deadline, p.now, p.proof]);
  }

  regrantLease(p: Params<'regrantLease'>): Promise<Job | undefined> {
    return this.job(regrantLease, [p.jobId, p.attempt, p.worker, p.deadline, p.now, p.proof]);
  }

  async insertAttempt(p: Params<'insertAttempt'>): Promise<void> {
    await this.ctx.run(insertAttempt, [p.jobId, p.attempt, p.worker, p.now]);
  }

  async extendLease(p: Params<'extendLease'>): Promise<boolean> {
    return (await this.ctx.run(extendLease, [p.jobId, p.attempt, p.token, p.now, p.deadline])) === 1;
  }

  async updateProgress(p: Params<'updateProgress'>): Promise<boolean> {
    return (await this.ctx.run(updateProgress, [p.jobId, p.attempt, p.token, p.now, p.fraction, p.message])) === 1;
  }

  async finishAttempt(p: Params<'finishAttempt'>): Promise<boolean> {
    return (await this.ctx.run(exits[p.expect].finish, [...guard(p), p.result])) === 1;
  }

  async failAttempt(p: Params<'failAttempt'>): Promise<boolean> {
    return (await this.ctx.run(exits[p.expect].fail, [...guard(p), p.reason, p.error.class, p.error.code, p.error.message])) === 1;
  }

  async requeueAttempt(p: Params<'requeueAttempt'>): Promise<boolean> {
    return (await this.ctx.run(exits[p.expect].requeue, [...guard(p), p.notBefore, p.redispatchAt])) === 1;
  }

  async closeAttempt(p: Params<'closeAttempt'>): Promise<void> {
    await this.ctx.run(closeAttempt, [p.jobId, p.attempt, p.now, p.outcome, p.error]);
  }

  async insertOutbox(p: Params<'insertOutbox'>): Promise<void> {
    await this.ctx.run(insertOutbox, [p.kind, p.jobId, p.body, p.now, p.availableAt]);
  }
}

function guard(p: AttemptGuard): unknown[] {
  return [p.jobId, p.attempt, p.token, p.now, p.cancelRequested];
}
