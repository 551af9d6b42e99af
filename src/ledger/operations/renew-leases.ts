/**
 * renew: every lease one worker holds, in one transaction (one heartbeat, one commit),
 * each lease extended by its own guarded UPDATE. Leases are taken in job-id order, so two
 * renewals touching the same jobs lock them in the same order and cannot deadlock where
 * the database locks rows (PostgreSQL); the answer keeps the order asked.
 *
 * Params: worker, leases [(jobId, attempt, token)]
 * Result: renewed [(jobId, attempt, deadline = now + TTL)] and lost [(jobId, attempt, reason)]
 *   with reason unknown_job | ended | superseded | expired | cancelled. A lost lease is not
 *   extended: an expired one stays expired even if the sweeper has not run yet, and a
 *   cancelled one runs out so that the sweeper can end the job if its worker never does.
 */
import type { LeaseLoss, RenewLeasesParams, RenewLeasesResult } from '../ledger.js';
import { fenceLoss } from '../shared/lease-rules.js';
import { run, type OperationEnv, type Plan } from './plan.js';

export function* renewLeases(params: RenewLeasesParams, env: OperationEnv): Plan<RenewLeasesResult> {
  const { now } = env;
  const deadline = now + env.config.leaseTtlMs;
  const losses: Array<LeaseLoss | undefined> = [];
  for (const i of inJobIdOrder(params.leases)) {
    const { jobId, attempt, token } = params.leases[i]!;
    if (yield* run('extendLease', { jobId, attempt, token, deadline, now })) continue;
    const reason = fenceLoss(yield* run('selectJob', { jobId }), params.leases[i]!, now);
    if (!reason) throw new Error(`planrun ledger: renewal of ${jobId}@${attempt} refused for no known reason`);
    losses[i] = reason;
  }
  // Answered in the order asked.
  const result: RenewLeasesResult = { renewed: [], lost: [] };
  params.leases.forEach(({ jobId, attempt }, i) => {
    const reason = losses[i];
    if (reason) result.lost.push({ jobId, attempt, reason });
    else result.renewed.push({ jobId, attempt, deadline });
  });
  return result;
}

/** The indexes of `leases` in job-id order (no sort when they came in order). */
function inJobIdOrder(leases: RenewLeasesParams['leases']): number[] {
  const order = leases.map((_, i) => i);
  let sorted = true;
  for (let i = 1; i < leases.length && sorted; i++) sorted = leases[i - 1]!.jobId <= leases[i]!.jobId;
  return sorted ? order : order.sort((a, b) => compare(leases[a]!.jobId, leases[b]!.jobId));
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
