/**
 * The ledger's named statements (operations/statements.ts says what each must do) in
 * SQLite's dialect, run synchronously on prepared better-sqlite3 statements inside the
 * write's SAVEPOINT. SQLite has one writer at a time, so nothing here locks rows: a row
 * read in a write cannot change before that write ends.
 */
import type { Job } from '../ledger.js';
import type { StatementParams as Params } from '../operations/plan.js';
import type { LedgerStatements } from '../operations/statements.js';
import type { SqliteContext } from './context.js';
import { type JobRow, selectJobById, toJob } from './rows.js';

// The live, uncancelled lease (job, attempt, token) at @now.
const liveLease = `id = @jobId AND state = 'running' AND attempt = @attempt AND lease_token = @token
    AND lease_deadline > @now AND cancel_requested = 0`;

const grantLease = `UPDATE jobs SET state = 'running', lease_token = @token, lease_holder = @worker, lease_proof = @proof,
    lease_deadline = @deadline, redispatch_at = NULL, started_at = COALESCE(started_at, @now), updated_at = @now
  WHERE id = @jobId AND state = 'queued' AND attempt = @attempt AND not_before <= @now
  RETURNING *`;
const regrantLease = `UPDATE jobs SET lease_deadline = @deadline, updated_at = @now
  WHERE id = @jobId AND state = 'running' AND attempt = @attempt AND lease_holder = @worker
    AND lease_proof = @proof AND lease_deadline > @now AND cancel_requested = 0
  RETURNING *`;
const insertAttempt = 'INSERT INTO attempts (job_id, attempt, worker, started_at) VALUES (@jobId, @attempt, @worker, @now)';

const extendLease = `UPDATE jobs SET lease_deadline = @deadline, updated_at = @now WHERE ${liveLease}`;
const updateProgress = `UPDATE jobs SET progress = @fraction, progress_message = @message, updated_at = @now WHERE ${liveLease}`;

export class SqliteStatements implements LedgerStatements {
  constructor(private readonly ctx: SqliteContext) {}

  /** The one row `sql` answers (a SELECT, or a change RETURNING *), as a Job. */
  private job(sql: string, params: object | string): Job | undefined {
    const row = this.ctx.sql(sql).get(params) as JobRow | undefined;
    return row && toJob(row);
  }

  selectJob({ jobId }: { jobId: string }): Job | undefined {
    return this.job(selectJobById, jobId);
  }

  grantLease(params: Params<'grantLease'>): Job | undefined {
    return this.job(grantLease, params);
  }

  regrantLease(params: Params<'regrantLease'>): Job | undefined {
    return this.job(regrantLease, params);
  }

  insertAttempt(params: Params<'insertAttempt'>): void {
    this.ctx.sql(insertAttempt).run(params);
  }

  extendLease(params: Params<'extendLease'>): boolean {
    return this.ctx.sql(extendLease).run(params).changes === 1;
  }

  updateProgress(params: Params<'updateProgress'>): boolean {
    return this.ctx.sql(updateProgress).run(params).changes === 1;
  }
}
