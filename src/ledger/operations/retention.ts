/**
 * Retention (issue 14): ended jobs older than the retention period are deleted, with every
 * row that names them. A job is prunable only once its result message went out (no unsent
 * outbox row: the announcement is never lost to a prune) and the store cleaner closed its
 * upload records. The pass (src/orchestrator/retention.ts) finds candidates, removes their
 * stored outputs, then prunes them: outputs first, so that a pass that dies between the
 * two leaves rows to find again, never files nobody knows of.
 */
import type { PrunableJob, PrunableJobsParams, PruneJobsParams } from '../ledger.js';
import { validateBatchLimit } from '../shared/input-validation.js';
import { run, type Plan } from './plan.js';

/** Most jobs one batch of the retention pass takes. */
export const maxPruneBatch = 1000;

export function* findPrunableJobs({ endedBefore, limit }: PrunableJobsParams): Plan<PrunableJob[]> {
  return yield* run('selectPrunableJobs', { endedBefore, limit: validateBatchLimit(limit, maxPruneBatch), jobIds: null });
}

export function* pruneJobs({ jobIds, endedBefore }: PruneJobsParams): Plan<string[]> {
  if (jobIds.length === 0) return [];
  const limit = validateBatchLimit(jobIds.length, maxPruneBatch);
  // Read again, locked: a job still prunable now (another pass may have taken it meanwhile).
  const prunable = (yield* run('selectPrunableJobs', { endedBefore, limit, jobIds })).map((job) => job.id);
  if (prunable.length > 0) yield* run('deleteJobs', { jobIds: prunable });
  return prunable;
}
