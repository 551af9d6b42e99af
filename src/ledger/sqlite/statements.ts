/**
 * The ledger's named statements (operations/statements.ts says what each must do) in
 * SQLite's dialect, run synchronously on prepared better-sqlite3 statements inside the
 * write's SAVEPOINT. SQLite has one writer at a time, so nothing here locks rows: a row
 * read in a write cannot change before that write ends.
 */
import type { Job } from '../ledger.js';
import type { LedgerStatements, LeaseKey } from '../operations/statements.js';
import type { SqliteContext } from './context.js';
import { type JobRow, selectJobById, toJob } from './rows.js';

// The live, uncancelled lease (job, attempt, token) at @now.
const liveLease = `id = @jobId AND state = 'running' AND attempt = @attempt AND lease_token = @token
    AND lease_deadline > @now AND cancel_requested = 0`;

const extendLease = `UPDATE jobs SET lease_deadline = @deadline, updated_at = @now WHERE ${liveLease}`;
const updateProgress = `UPDATE jobs SET progress = @fraction, progress_message = @message, updated_at = @now WHERE ${liveLease}`;

export class SqliteStatements implements LedgerStatements {
  constructor(private readonly ctx: SqliteContext) {}

  selectJob({ jobId }: { jobId: string }): Job | undefined {
    const row = this.ctx.sql(selectJobById).get(jobId) as JobRow | undefined;
    return row && toJob(row);
  }

  extendLease(params: LeaseKey & { deadline: number; now: number }): boolean {
    return this.ctx.sql(extendLease).run(params).changes === 1;
  }

  updateProgress(params: LeaseKey & { fraction: number; message: string | null; now: number }): boolean {
    return this.ctx.sql(updateProgress).run(params).changes === 1;
  }
}
