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

interface Entry {
  member: FleetMember;
  /** The digest of the worker process's secret that first spoke for this name. */
  proof: string;
}

/**
 * The workers seen lately, from their heartbeats. Kept in memory: after an orchestrator
 * restart the fleet refills within one heartbeat interval, and until it has (see
 * refillFor) it does not say what is missing.
 */
export class Fleet {
  private readonly members = new Map<string, Entry>();
  private refilledAt = 0;

  constructor(
    private readonly clock: Clock,
    /** A worker not heard from for this long no longer counts. */
    private readonly windowMs: number,
  ) {}

  /**
   * Records a heartbeat's report, unless a live member of that name was recorded with
   * another proof: then it is someone else speaking for that worker (its name is public),
   * and nothing changes. A name is free again once its member left the window.
   */
  record(report: WorkerReport, proof: string): boolean {
    const known = this.members.get(report.worker);
    if (known && known.proof !== proof && this.isLive(known.member)) return false;
    this.members.set(report.worker, { member: { ...report, lastHeartbeat: this.clock.now() }, proof });
    return true;
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
    for (const [id, entry] of this.members) if (!this.isLive(entry.member)) this.members.delete(id);
    return [...this.members.values()].map((entry) => entry.member);
  }

  private isLive(member: FleetMember): boolean {
    return member.lastHeartbeat >= this.clock.now() - this.windowMs;
  }
}
