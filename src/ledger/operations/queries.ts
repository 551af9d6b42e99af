/**
 * Read-only views of the ledger: one job, its attempts, pages of jobs, counts by state.
 * Each is one statement (outside any explicit transaction, on PostgreSQL). A listing's
 * parameters, its cursor and the cut of a page are shared/input-validation.ts and
 * shared/job-listing.ts: invalid_input for a bad limit, state or cursor, or a NUL in a filter.
 */
import type { ActiveJobCount, AttemptRecord, Job, JobPage, ListJobsParams } from '../ledger.js';
import { validateListParams } from '../shared/input-validation.js';
import { decodeCursor, jobPage } from '../shared/job-listing.js';
import type { JobState } from '../states.js';
import { run, type OperationEnv, type Plan } from './plan.js';

/** The job, or undefined when there is none or it is another tenant's. */
export function* getJob(jobId: string, tenant: string | undefined): Plan<Job | undefined> {
  const job = yield* run('selectJob', { jobId });
  return job && (tenant === undefined || job.tenant === tenant) ? job : undefined;
}

export function* getAttempts(jobId: string): Plan<AttemptRecord[]> {
  return yield* run('selectAttempts', { jobId });
}

/** Newest first; the cursor is the last sequence number seen. */
export function* listJobs(params: ListJobsParams): Plan<JobPage> {
  const limit = validateListParams(params);
  const rows = yield* run('selectJobPage', {
    tenant: params.tenant ?? null,
    state: params.state ?? null,
    type: params.type ?? null,
    before: params.cursor === undefined ? null : decodeCursor(params.cursor),
    limit: limit + 1,
  });
  return jobPage(rows, limit, (row) => row.job);
}

export function* countJobsByState(): Plan<Record<JobState, number>> {
  const result: Record<JobState, number> = { queued: 0, running: 0, finished: 0, failed: 0 };
  for (const { state, count } of yield* run('countJobsByState', {})) result[state] = count;
  return result;
}

export function* countActiveJobs({ now }: OperationEnv): Plan<ActiveJobCount[]> {
  return yield* run('selectActiveJobCounts', { now });
}
