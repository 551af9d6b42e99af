import type { Clock } from '../core/clock.js';

/** What a worker says about itself with every heartbeat. */
export interface WorkerReport {
  worker: string;
  jobTypes: string[];
  capabilities: string[];
  slots: number;
  running: number;
}

export interface FleetMember extends WorkerReport {
  lastHeartbeat: number;
}

/**
 * The workers seen lately, from their heartbeats. Kept in memory: after an orchestrator
 * restart the fleet refills within one heartbeat interval.
 */
export class Fleet {
  private readonly members = new Map<string, FleetMember>();

  constructor(
    private readonly clock: Clock,
    /** A worker not heard from for this long no longer counts. */
    private readonly windowMs: number,
  ) {}

  record(report: WorkerReport): void {
    this.members.set(report.worker, { ...report, lastHeartbeat: this.clock.now() });
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

  /** The members heard from within the window; forgets the others. */
  list(): FleetMember[] {
    const horizon = this.clock.now() - this.windowMs;
    for (const [id, member] of this.members) if (member.lastHeartbeat < horizon) this.members.delete(id);
    return [...this.members.values()];
  }
}
