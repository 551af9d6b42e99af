/**
 * Read-only views of the ledger: one job, its attempts, pages of jobs, counts by state.
 * Each is one statement outside any explicit transaction. A listing's parameters, its
 * cursor and the cut of a page are shared/input-validation.ts and shared/job-listing.ts:
 * invalid_input for a bad limit, state or cursor, or a NUL in a filter.
 */
import type { AttemptRecord, Job, JobPage, ListJobsParams } from '../../ledger.js';
import { validateListParams } from '../../shared/input-validation.js';
import { decodeCursor, jobPage } from '../../shared/job-listing.js';
import type { JobState } from '../../states.js';
import type { PgContext } from '../context.js';
import { type AttemptRow, type JobRow, selectJobById, toAttempt, toJob } from '../rows.js';

export async function getJob(ctx: PgContext, jobId: string, tenant?: string): Promise<Job | undefined> {
  const row = await ctx.row<JobRow>(selectJobById, [jobId]);
  if (!row || (tenant !== undefined && row.tenant !== tenant)) return undefined;
  return toJob(row);
}

const attemptsOf = 'SELECT * FROM attempts WHERE job_id = $1 ORDER BY attempt';

export async function getAttempts(ctx: PgContext, jobId: string): Promise<AttemptRecord[]> {
  return (await ctx.rows<AttemptRow>(attemptsOf, [jobId])).map(toAttempt);
}

/**
 * Newest first; the cursor is the last seq seen. The statement names only the filters
 * given, so each of its few shapes gets a plan that uses the matching index.
 */
export async function listJobs(ctx: PgContext, params: ListJobsParams): Promise<JobPage> {
  const limit = validateListParams(params);
  const where: string[] = [];
  const values: unknown[] = [];
  const filter = (column: string, op: string, value: unknown) => {
    values.push(value);
    where.push(`${column} ${op} $${values.length}`);
  };
  if (params.tenant !== undefined) filter('tenant', '=', params.tenant);
  if (params.state !== undefined) filter('state', '=', params.state);
  if (params.type !== undefined) filter('type', '=', params.type);
  if (params.cursor !== undefined) filter('seq', '<', decodeCursor(params.cursor));
  values.push(limit + 1);
  const text = `SELECT * FROM jobs ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY seq DESC LIMIT $${values.length}`;
  const rows = await ctx.rows<JobRow>(text, values);
  return jobPage(rows, limit, toJob);
}

const counts = 'SELECT state, COUNT(*) AS n FROM jobs GROUP BY state';

export async function countJobsByState(ctx: PgContext): Promise<Record<JobState, number>> {
  const result: Record<JobState, number> = { queued: 0, running: 0, finished: 0, failed: 0 };
  for (const { state, n } of await ctx.rows<{ state: JobState; n: number }>(counts)) result[state] = n;
  return result;
}
