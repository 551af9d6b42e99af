/**
 * Read-only views of the ledger: one job, its attempts, pages of jobs, counts by state.
 */
import { LedgerError, LedgerErrorCode } from '../../errors.js';
import type { AttemptRecord, Job, JobPage, ListJobsParams } from '../../ledger.js';
import { JobState } from '../../states.js';
import type { SqliteContext } from '../context.js';
import { type AttemptRow, type JobRow, selectJobById, toAttempt, toJob } from '../rows.js';

export function getJob(ctx: SqliteContext, jobId: string, tenant?: string): Job | undefined {
  const row = ctx.sql(selectJobById).get(jobId) as JobRow | undefined;
  if (!row || (tenant !== undefined && row.tenant !== tenant)) return undefined;
  return toJob(row);
}

const attemptsOf = 'SELECT * FROM attempts WHERE job_id = ? ORDER BY attempt';

export function getAttempts(ctx: SqliteContext, jobId: string): AttemptRecord[] {
  return (ctx.sql(attemptsOf).all(jobId) as AttemptRow[]).map(toAttempt);
}

// Newest first; the cursor is the last seq seen. NULL filters match everything, so one
// prepared statement serves every combination.
const page = `SELECT * FROM jobs
  WHERE (@tenant IS NULL OR tenant = @tenant) AND (@state IS NULL OR state = @state)
    AND (@type IS NULL OR type = @type) AND (@before IS NULL OR seq < @before)
  ORDER BY seq DESC LIMIT @limit`;

export function listJobs(ctx: SqliteContext, params: ListJobsParams): JobPage {
  const limit = params.limit ?? 50;
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
    throw new LedgerError(LedgerErrorCode.invalidInput, 'limit must be an integer from 1 to 1000');
  }
  if (params.state !== undefined && !Object.values(JobState).includes(params.state)) {
    throw new LedgerError(LedgerErrorCode.invalidInput, `state must be one of ${Object.values(JobState).join(', ')}`);
  }
  const rows = ctx.sql(page).all({
    tenant: params.tenant ?? null,
    state: params.state ?? null,
    type: params.type ?? null,
    before: params.cursor === undefined ? null : decodeCursor(params.cursor),
    limit: limit + 1,
  }) as JobRow[];
  const more = rows.length > limit;
  const jobs = rows.slice(0, limit);
  return { jobs: jobs.map(toJob), nextCursor: more ? encodeCursor(jobs[jobs.length - 1]!.seq) : null };
}

function encodeCursor(seq: number): string {
  return Buffer.from(`seq:${seq}`).toString('base64url');
}

function decodeCursor(cursor: string): number {
  const match = /^seq:(\d+)$/.exec(Buffer.from(cursor, 'base64url').toString());
  if (!match) throw new LedgerError(LedgerErrorCode.invalidInput, 'cursor is not one this ledger returned');
  return Number(match[1]);
}

const counts = 'SELECT state, COUNT(*) AS n FROM jobs GROUP BY state';

export function countJobsByState(ctx: SqliteContext): Record<JobState, number> {
  const result: Record<JobState, number> = { queued: 0, running: 0, finished: 0, failed: 0 };
  for (const { state, n } of ctx.sql(counts).all() as Array<{ state: JobState; n: number }>) result[state] = n;
  return result;
}
