import type { Clock } from '../core/clock.js';

export interface HeldLease {
  jobId: string;
  attempt: number;
  token: string;
  tenant: string;
  /**
   * This worker's own idea of when the lease ends. It is never later than the ledger's:
   * it is measured from when the granting or renewing request was *sent*, moves only on
   * replies that confirm the renewal, and a safety margin for clock-rate drift is taken
   * off the TTL (see deadlineFor).
   */
  localDeadline: number;
  /**
   * A heartbeat's answer renewed it: the ledger counts the grant as taken up. Until then
   * the ledger takes the grant back once its grant window passes (edge abandon), so the
   * worker keeps sending the heartbeat after a grant until one is answered (Worker).
   */
  takenUp: boolean;
  /** `presigned`: the orchestrator has an object store, and outputs go only where a live fence answer says. */
  store?: 'presigned';
  /** Aborts the job when the lease is lost. */
  abort: AbortController;
}

/** The leases a worker holds, keyed by job id. */
export class LeaseBook {
  private readonly leases = new Map<string, HeldLease>();
  /** Who waits for a lease's grant to be taken up (whenTakenUp), told true when it is, false when the lease goes. */
  private readonly takeUpWaiters = new Map<HeldLease, Array<(takenUp: boolean) => void>>();

  /** `safetyFraction`: the fraction of each TTL kept as a margin for clock-rate drift. */
  constructor(
    private readonly clock: Clock,
    private readonly safetyFraction: number,
  ) {}

  /** The local deadline of a lease granted or renewed for `ttlMs` by a request sent at `sentAt`, the margin taken off. */
  deadlineFor(sentAt: number, ttlMs: number): number {
    return sentAt + ttlMs * (1 - this.safetyFraction);
  }

  add(lease: Omit<HeldLease, 'abort' | 'localDeadline' | 'takenUp'>, sentAt: number, ttlMs: number): HeldLease {
    const held: HeldLease = { ...lease, localDeadline: this.deadlineFor(sentAt, ttlMs), takenUp: false, abort: new AbortController() };
    this.leases.set(lease.jobId, held);
    return held;
  }

  get(jobId: string): HeldLease | undefined {
    return this.leases.get(jobId);
  }

  remove(jobId: string): void {
    const lease = this.leases.get(jobId);
    this.leases.delete(jobId);
    if (lease) this.tellTakeUpWaiters(lease, false);
  }

  all(): HeldLease[] {
    return [...this.leases.values()];
  }

  /** A confirmed renewal: move the deadline forward (never back) for the same attempt. */
  renewed(jobId: string, attempt: number, sentAt: number, ttlMs: number): void {
    const lease = this.leases.get(jobId);
    if (!lease || lease.attempt !== attempt) return;
    lease.takenUp = true;
    lease.localDeadline = Math.max(lease.localDeadline, this.deadlineFor(sentAt, ttlMs));
    this.tellTakeUpWaiters(lease, true);
  }

  /**
   * Resolves true once a heartbeat's answer has taken up the lease's grant, false if the
   * lease is lost (its local deadline passing included) or removed first. Outputs wait for it: the fence
   * is a read that does not take a grant up, so a grant nobody renewed could still be
   * abandoned (and its attempt granted again, to the same output names) after a live fence.
   */
  whenTakenUp(lease: HeldLease): Promise<boolean> {
    if (lease.takenUp) return Promise.resolve(true);
    if (lease.abort.signal.aborted || !this.isLocallyLive(lease)) return Promise.resolve(false);
    // A lease past its local deadline is lost by the worker's deadline check, which aborts it.
    return new Promise((resolve) => {
      const settle = (takenUp: boolean) => {
        lease.abort.signal.removeEventListener('abort', onLoss);
        resolve(takenUp);
      };
      const onLoss = () => this.tellTakeUpWaiters(lease, false);
      lease.abort.signal.addEventListener('abort', onLoss, { once: true });
      const waiters = this.takeUpWaiters.get(lease) ?? [];
      waiters.push(settle);
      this.takeUpWaiters.set(lease, waiters);
    });
  }

  private tellTakeUpWaiters(lease: HeldLease, takenUp: boolean): void {
    const waiters = this.takeUpWaiters.get(lease);
    this.takeUpWaiters.delete(lease);
    for (const settle of waiters ?? []) settle(takenUp);
  }

  /** Whether this worker may still act on the lease by its own clock. */
  isLocallyLive(lease: HeldLease): boolean {
    return this.clock.now() < lease.localDeadline;
  }

  /** Leases whose grant no heartbeat answer has renewed yet, still live by the local clock and not lost. */
  notTakenUp(): HeldLease[] {
    return this.all().filter((lease) => !lease.takenUp && !lease.abort.signal.aborted && this.isLocallyLive(lease));
  }

  /** The leases whose local deadline has passed. */
  expired(): HeldLease[] {
    const now = this.clock.now();
    return this.all().filter((lease) => lease.localDeadline <= now);
  }
}
