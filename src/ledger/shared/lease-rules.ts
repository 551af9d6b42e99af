/**
 * The reasoning every driver shares about leases, stated on the Ledger's Job type so that
 * no driver's row shape leaks in (a driver converts its row with its toJob first): why a
 * (job, attempt, token) is not the live lease, why a grant is refused, and which edge a
 * settle or an expired lease takes, and which queued jobs a sweep may send again. Each
 * rule names the Job fields it reads.
 */
import { GrantRefusal, LeaseLoss, type Job, type LeaseRef, type SettleOutcome, type SettleResult, type SweepParams } from '../ledger.js';
import { isTerminal, type Transition } from '../states.js';

export type SettleTransition = Extract<SettleResult, { accepted: true }>['transition'];

/** What the lease rules read of a job. */
export type LeaseView = Pick<Job, 'state' | 'attempt' | 'leaseToken' | 'leaseDeadline' | 'cancelRequested'>;

/** Why `ref` is not the live lease of `job` at `now`, or undefined when it is. */
export function leaseLoss(job: LeaseView | undefined, ref: LeaseRef, now: number): LeaseLoss | undefined {
  if (!job) return LeaseLoss.unknownJob;
  if (isTerminal(job.state)) return LeaseLoss.ended;
  if (job.state !== 'running' || job.attempt !== ref.attempt || job.leaseToken !== ref.token) return LeaseLoss.superseded;
  if ((job.leaseDeadline ?? 0) <= now) return LeaseLoss.expired;
  return undefined;
}

/** As leaseLoss, and a requested cancellation also ends the lease for renewals, progress and fences. */
export function fenceLoss(job: LeaseView | undefined, ref: LeaseRef, now: number): LeaseLoss | undefined {
  return leaseLoss(job, ref, now) ?? (job?.cancelRequested ? LeaseLoss.cancelled : undefined);
}

/** Why attempt `attempt` of `job` cannot be granted at `now`, or undefined when it can. */
/** The job as a request scoped to `tenant` may see it: another tenant's is as good as missing. */
export function ofTenant<J extends Pick<Job, 'tenant'>>(job: J | undefined, tenant: string | undefined): J | undefined {
  return job && (tenant === undefined || job.tenant === tenant) ? job : undefined;
}

export function grantRefusal(job: Pick<Job, 'state' | 'attempt' | 'notBefore'> | undefined, attempt: number, now: number): GrantRefusal | undefined {
  if (!job) return GrantRefusal.unknownJob;
  if (isTerminal(job.state)) return GrantRefusal.ended;
  if (job.attempt !== attempt) return GrantRefusal.otherAttempt;
  if (job.state === 'running') return GrantRefusal.alreadyRunning;
  if (job.notBefore > now) return GrantRefusal.notDue;
  return undefined;
}

/** The edge a settle of the running `job` takes for `outcome`. */
export function settleTransition(job: Pick<Job, 'attempt' | 'maxAttempts' | 'cancelRequested'>, outcome: SettleOutcome): SettleTransition {
  if (outcome.kind === 'finished') return 'finish';
  if (job.cancelRequested) return 'cancel_running';
  if (outcome.error.class === 'permanent') return 'fail_permanent';
  return job.attempt < job.maxAttempts ? 'retry' : 'exhaust';
}

/**
 * The edge a handed-back lease takes. A release consumes the attempt number like any
 * other end of an attempt (attempts are fenced by number and bounded by maxAttempts), so
 * on the last attempt it fails the job as exhausted, as the expiry it replaces would have.
 */
export function releaseTransition(
  job: Pick<Job, 'attempt' | 'maxAttempts' | 'cancelRequested'>,
): Extract<Transition, 'cancel_running' | 'release' | 'exhaust'> {
  if (job.cancelRequested) return 'cancel_running';
  return job.attempt < job.maxAttempts ? 'release' : 'exhaust';
}

/** The edge the sweeper takes for the running `job` whose lease ran out. */
export function expiryTransition(job: Pick<Job, 'attempt' | 'maxAttempts' | 'cancelRequested'>): Extract<Transition, 'cancel_running' | 'expire' | 'exhaust'> {
  if (job.cancelRequested) return 'cancel_running';
  return job.attempt < job.maxAttempts ? 'expire' : 'exhaust';
}

/** Expired leases grouped by attempt number: the backoff of a requeue depends on it, so a sweep requeues one group at a time. */
export function groupByAttempt<T extends { attempt: number }>(leases: readonly T[]): Map<number, T[]> {
  const groups = new Map<number, T[]>();
  for (const lease of leases) {
    const group = groups.get(lease.attempt);
    if (group) group.push(lease);
    else groups.set(lease.attempt, [lease]);
  }
  return groups;
}

/** Whether a sweep may send a queued job of a type its work message again (`redispatchTypes`: every type when not given). */
export function redispatchableTypes(params: Pick<SweepParams, 'redispatchTypes'>): (type: string) => boolean {
  if (params.redispatchTypes === undefined) return () => true;
  const types = new Set(params.redispatchTypes);
  return (type) => types.has(type);
}
