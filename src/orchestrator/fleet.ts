import type { Clock } from '../core/clock.js';
import type { HeldBackType } from '../control/protocol.js';

/** What a worker says about itself with every heartbeat. */
export interface WorkerReport {
  worker: string;
  jobTypes: string[];
  capabilities: string[];
  /** The job types it has but does not offer, each with the capabilities it lacks for it. */
  heldBack?: HeldBackType[];
  slots: number;
  running: number;
}

export interface FleetMember extends WorkerReport {
  lastHeartbeat: number;
}

/**
 * The workers seen lately, as this orchestrator knows them: the heartbeats it answered
 * (each recorded in the ledger first, which refuses a name another worker process holds)
 * and, merged every refresh, the fleet the ledger holds, heard by every orchestrator
 * sharing it. After an orchestrator restart it does not say what is missing until it
 * has refilled (see refillFor).
 */
export class Fleet {
  private readonly members = new Map<string, FleetMember>();
  private refilledAt = 0;

  constructor(
    private readonly clock: Clock,
    /** A worker not heard from for this long no longer counts. */
    readonly windowMs: number,
  ) {}

  /**
   * Records a heartbeat's report the ledger accepted, heard at `heardAt` (the ledger's time;
   * now unless given). Answers whether it changed what the fleet offers: a worker new (or
   * back after falling out of the window), or one whose job types or slots changed.
   */
  record(report: WorkerReport, heardAt = this.clock.now()): boolean {
    const known = this.members.get(report.worker);
    this.members.set(report.worker, { ...report, lastHeartbeat: heardAt });
    return known === undefined || !this.isLive(known) || known.slots !== report.slots || !sameList(known.jobTypes, report.jobTypes);
  }

  /** Takes in the fleet the ledger holds: each member heard from later than this orchestrator last heard it. */
  merge(members: readonly FleetMember[]): void {
    for (const member of members) {
      const known = this.members.get(member.worker);
      if (!known || known.lastHeartbeat < member.lastHeartbeat) this.members.set(member.worker, member);
    }
  }

  /**
   * The job types some live worker could start a job of now: it said, in its last
   * heartbeat, that it had a free slot. A queued job of any other type whose work message
   * went unleased is waiting behind busy workers (or for one to come), not lost.
   */
  typesWithFreeSlots(): string[] {
    const types = new Set<string>();
    for (const member of this.list()) {
      if (member.running < member.slots) for (const type of member.jobTypes) types.add(type);
    }
    return [...types];
  }

  /**
   * A restarted orchestrator knows only the workers heard from since it started, and every
   * live worker is heard from within a lease TTL (or it loses its leases). For `ms` from
   * now the fleet is refilling: `known` answers undefined, so that a job of a type whose
   * workers have not spoken yet is not failed as unroutable (nor its queue left undeclared).
   */
  refillFor(ms: number): void {
    this.refilledAt = this.clock.now() + ms;
  }

  /** The members, or undefined while the fleet refills and cannot tell what is missing. */
  known(): FleetMember[] | undefined {
    return this.clock.now() < this.refilledAt ? undefined : this.list();
  }

  /** The members heard from within the window; forgets the others. */
  list(): FleetMember[] {
    for (const [id, member] of this.members) if (!this.isLive(member)) this.members.delete(id);
    return [...this.members.values()];
  }

  private isLive(member: FleetMember): boolean {
    return member.lastHeartbeat >= this.clock.now() - this.windowMs;
  }
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((item, i) => item === b[i]);
}
