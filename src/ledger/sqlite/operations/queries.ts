/**
 * Read-only views of the ledger: one job, its attempts, pages of jobs, counts by state.
 * A listing's parameters, its cursor and the cut of a page are shared/input-validation.ts
 * and shared/job-listing.ts: invalid_input for a bad limit, state or cursor, or a NUL in a filter.
 */
import type { AttemptRecord, Job, JobPage, ListJobsParams } from '../../ledger.js';
import { validateListParams } from '../../shared/input-validation.js';
import { decodeCursor, jobPage } from '../../shared/job-listing.js';
import type { JobState } from '../../states.js';
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
  const limit = validateListParams(params);
  const rows = ctx.sql(page).all({
    tenant: params.tenant ?? null,
    state: params.state ?? null,
    type: params.type ?? null,
    before: params.cursor === undefined ? null : decodeCursor(params.cursor),
    limit: limit + 1,
  }) as JobRow[];
  return jobPage(rows, limit, toJob);
}

const counts = 'SELECT state, COUNT(*) AS n FROM jobs GROUP BY state';

export function countJobsByState(ctx: SqliteContext): Record<JobState, number> {
  const result: Record<JobState, number> = { queued: 0, running: 0, finished: 0, failed: 0 };
  for (const { state, n } of ctx.sql(counts).all() as Array<{ state: JobState; n: number }>) result[state] = n;
  return result;
}
