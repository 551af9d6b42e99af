/**
 * Why a (job, attempt, token) is not, or no longer, the live lease. Shared by every
 * fenced operation so that renew, check, progress and settle agree on the answer.
 */
import { LeaseLoss, type LeaseRef } from '../../ledger.js';
import { isTerminal } from '../../states.js';
import type { JobRow } from '../rows.js';

export function leaseLoss(row: JobRow | undefined, ref: LeaseRef, now: number): LeaseLoss | undefined {
  if (!row) return LeaseLoss.unknownJob;
  if (isTerminal(row.state)) return LeaseLoss.ended;
  if (row.state !== 'running' || row.attempt !== ref.attempt || row.lease_token !== ref.token) return LeaseLoss.superseded;
  if ((row.lease_deadline ?? 0) <= now) return LeaseLoss.expired;
  return undefined;
}

/** As leaseLoss, and a requested cancellation also ends the lease for renewals and fences. */
export function fenceLoss(row: JobRow | undefined, ref: LeaseRef, now: number): LeaseLoss | undefined {
  return leaseLoss(row, ref, now) ?? (row?.cancel_requested === 1 ? LeaseLoss.cancelled : undefined);
}
