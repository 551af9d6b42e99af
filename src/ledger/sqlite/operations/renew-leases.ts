/**
 * renew: every lease one worker holds, in one transaction (one heartbeat, one commit).
 *
 * Params: worker, leases [(jobId, attempt, token)]
 * Result: renewed [(jobId, attempt, deadline = now + TTL)] and lost [(jobId, attempt, reason)]
 *   with reason unknown_job | ended | superseded | expired | cancelled. A lost lease is not
 *   extended: an expired one stays expired even if the sweeper has not run yet, and a
 *   cancelled one runs out so that the sweeper can end the job if its worker never does.
 */
import type { RenewLeasesParams, RenewLeasesResult } from '../../ledger.js';
import { fenceLoss } from '../../shared/lease-rules.js';
import type { SqliteContext } from '../context.js';
import { type JobRow, selectJobById, toJob } from '../rows.js';

const extend = `UPDATE jobs SET lease_deadline = @deadline, updated_at = @now
  WHERE id = @jobId AND state = 'running' AND attempt = @attempt AND lease_token = @token
    AND lease_deadline > @now AND cancel_requested = 0`;

export function renewLeases(ctx: SqliteContext, params: RenewLeasesParams): RenewLeasesResult {
  const now = ctx.clock.now();
  const deadline = now + ctx.config.leaseTtlMs;
  const result: RenewLeasesResult = { renewed: [], lost: [] };
  for (const lease of params.leases) {
    const changed = ctx.sql(extend).run({ ...lease, deadline, now }).changes;
    if (changed === 1) {
      result.renewed.push({ jobId: lease.jobId, attempt: lease.attempt, deadline });
      continue;
    }
    const row = ctx.sql(selectJobById).get(lease.jobId) as JobRow | undefined;
    const reason = fenceLoss(row ? toJob(row) : undefined, lease, now);
    if (!reason) throw new Error(`planrun ledger: renewal of ${lease.jobId}@${lease.attempt} refused for no known reason`);
    result.lost.push({ jobId: lease.jobId, attempt: lease.attempt, reason });
  }
  return result;
}
