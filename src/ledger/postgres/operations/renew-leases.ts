/**
 * renew: every lease one worker holds, in one transaction (one heartbeat, one commit),
 * each lease extended by its own guarded UPDATE. Leases are taken in job-id order, so two
 * renewals touching the same jobs lock them in the same order and cannot deadlock.
 *
 * Params: worker, leases [(jobId, attempt, token)]
 * Result: renewed [(jobId, attempt, deadline = now + TTL)] and lost [(jobId, attempt, reason)]
 *   with reason unknown_job | ended | superseded | expired | cancelled. A lost lease is not
 *   extended: an expired one stays expired even if the sweeper has not run yet, and a
 *   cancelled one runs out so that the sweeper can end the job if its worker never does.
 */
import type { LeaseLoss, RenewLeasesParams, RenewLeasesResult } from '../../ledger.js';
import { fenceLoss } from '../../shared/lease-rules.js';
import type { PgContext } from '../context.js';
import { type JobRow, selectJobById, toJob } from '../rows.js';

const extend = `UPDATE jobs SET lease_deadline = $4, updated_at = $5
  WHERE id = $1 AND state = 'running' AND attempt = $2 AND lease_token = $3
    AND lease_deadline > $5 AND NOT cancel_requested`;

export async function renewLeases(ctx: PgContext, params: RenewLeasesParams): Promise<RenewLeasesResult> {
  const now = ctx.clock.now();
  const deadline = now + ctx.config.leaseTtlMs;
  const answers: Array<{ renewed: boolean; reason?: LeaseLoss }> = [];
  const order = params.leases.map((_, i) => i).sort((a, b) => compare(params.leases[a]!.jobId, params.leases[b]!.jobId));
  for (const i of order) {
    const lease = params.leases[i]!;
    const changed = await ctx.run(extend, [lease.jobId, lease.attempt, lease.token, deadline, now]);
    if (changed === 1) {
      answers[i] = { renewed: true };
      continue;
    }
    const row = await ctx.row<JobRow>(selectJobById, [lease.jobId]);
    const reason = fenceLoss(row ? toJob(row) : undefined, lease, now);
    if (!reason) throw new Error(`planrun ledger: renewal of ${lease.jobId}@${lease.attempt} refused for no known reason`);
    answers[i] = { renewed: false, reason };
  }
  // Answered in the order asked.
  const result: RenewLeasesResult = { renewed: [], lost: [] };
  params.leases.forEach(({ jobId, attempt }, i) => {
    const answer = answers[i]!;
    if (answer.renewed) result.renewed.push({ jobId, attempt, deadline });
    else result.lost.push({ jobId, attempt, reason: answer.reason! });
  });
  return result;
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
