/**
 * The ledger's named statements (operations/statements.ts says what each must do) in
 * PostgreSQL's dialect, each one round trip on the write's connection (or the pool, for
 * a read). Several orchestrators may share the database: a plan that decides from a row
 * reads it with lockJob (FOR UPDATE), and every change is still a guarded UPDATE whose
 * row count or RETURNING row decides.
 */
import type { Job } from '../ledger.js';
import type { AsyncLedgerStatements } from '../operations/plan.js';
import type { LeaseKey } from '../operations/statements.js';
import type { PgContext } from './context.js';
import { type JobRow, selectJobById, toJob } from './rows.js';

// $1 job, $2 attempt, $3 token, $4 now: the live, uncancelled lease.
const liveLease = `id = $1 AND state = 'running' AND attempt = $2 AND lease_token = $3
    AND lease_deadline > $4 AND NOT cancel_requested`;

const extendLease = `UPDATE jobs SET lease_deadline = $5, updated_at = $4 WHERE ${liveLease}`;
const updateProgress = `UPDATE jobs SET progress = $5, progress_message = $6, updated_at = $4 WHERE ${liveLease}`;

export class PgStatements implements AsyncLedgerStatements {
  constructor(private readonly ctx: PgContext) {}

  async selectJob({ jobId }: { jobId: string }): Promise<Job | undefined> {
    const row = await this.ctx.row<JobRow>(selectJobById, [jobId]);
    return row && toJob(row);
  }

  async extendLease(p: LeaseKey & { deadline: number; now: number }): Promise<boolean> {
    return (await this.ctx.run(extendLease, [p.jobId, p.attempt, p.token, p.now, p.deadline])) === 1;
  }

  async updateProgress(p: LeaseKey & { fraction: number; message: string | null; now: number }): Promise<boolean> {
    return (await this.ctx.run(updateProgress, [p.jobId, p.attempt, p.token, p.now, p.fraction, p.message])) === 1;
  }
}
