/**
 * check (the fence): is (jobId, attempt, token) still the live lease, and until when?
 * A worker asks this right before it copies outputs anywhere visible.
 *
 * Result: { live: true, deadline } or { live: false, reason } with reason
 *   unknown_job | ended | superseded | expired | cancelled
 */
import type { CheckLeaseResult, LeaseRef } from '../../ledger.js';
import type { SqliteContext } from '../context.js';
import { type JobRow, selectJobById } from '../rows.js';
import { fenceLoss } from './lease-loss.js';

export function checkLease(ctx: SqliteContext, ref: LeaseRef): CheckLeaseResult {
  const row = ctx.sql(selectJobById).get(ref.jobId) as JobRow | undefined;
  const reason = fenceLoss(row, ref, ctx.clock.now());
  return reason ? { live: false, reason } : { live: true, deadline: row!.lease_deadline! };
}
