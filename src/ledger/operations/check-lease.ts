/**
 * check (the fence): is (jobId, attempt, token) still the live lease, and until when?
 * A worker asks this right before it copies outputs anywhere visible. One read.
 *
 * Result: { live: true, deadline } or { live: false, reason } with reason
 *   unknown_job | ended | superseded | expired | cancelled
 */
import type { CheckLeaseResult, LeaseRef } from '../ledger.js';
import { fenceLoss } from '../shared/lease-rules.js';
import { run, type OperationEnv, type Plan } from './plan.js';

export function* checkLease(ref: LeaseRef, env: OperationEnv): Plan<CheckLeaseResult> {
  const job = yield* run('selectJob', { jobId: ref.jobId });
  const reason = fenceLoss(job, ref, env.now);
  return reason ? { live: false, reason } : { live: true, deadline: job!.leaseDeadline! };
}
