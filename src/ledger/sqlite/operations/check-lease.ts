/**
 * check (the fence): is (jobId, attempt, token) still the live lease, and until when?
 * A worker asks this right before it copies outputs anywhere visible.
 *
 * Result: { live: true, deadline } or { live: false, reason } with reason
 *   unknown_job | ended | superseded | expired | cancelled
 */
import type { CheckLeaseResult, LeaseRef } from '../../ledger.js';
import { fenceLoss } from '../../shared/lease-rules.js';
import type { SqliteContext } from '../context.js';
import { type JobRow, selectJobById, toJob } from '../rows.js';

export function checkLease(ctx: SqliteContext, ref: LeaseRef): CheckLeaseResult {
  const row = ctx.sql(selectJobById).get(ref.jobId) as JobRow | undefined;
  const reason = fenceLoss(row ? toJob(row) : undefined, ref, ctx.clock.now());
  return reason ? { live: false, reason } : { live: true, deadline: row!.lease_deadline! };
}
