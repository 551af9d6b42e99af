import { statfs } from 'node:fs/promises';

/** Why a delivery was not admitted: every slot taken, or too little disk for its output reserve. */
export type AdmissionRefusal = 'no_free_slot' | 'no_disk_reserve';

export type AdmissionDecision = { admitted: true } | { admitted: false; reason: AdmissionRefusal; detail?: string };

/** How long a measure of the scratch volume's free space answers for it, when it lets a job in (see freeFor). */
export const freeBytesMaxAgeMs = 1000;

/**
 * The gates in front of the work: never more running jobs than slots, and never a start
 * without free disk on the scratch volume for every running job's output reserve plus
 * the new one's. A reservation is held from admission until the job's scratch is gone.
 */
export class Admission {
  private readonly reservations = new Map<string, number>();
  private lastMeasure: { free: number; at: number } | undefined;

  constructor(
    private readonly slots: number,
    private readonly scratchRoot: string,
    private readonly freeBytes: (path: string) => Promise<number> = freeBytesOn,
    private readonly now: () => number = Date.now,
  ) {
    if (!Number.isInteger(slots) || slots < 1) throw new RangeError(`slots must be a positive integer, got ${slots}`);
  }

  get running(): number {
    return this.reservations.size;
  }

  get hasFreeSlot(): boolean {
    return this.reservations.size < this.slots;
  }

  /** Reserves a slot and `reserveBytes` for `key`, or says why not. */
  async admit(key: string, reserveBytes: number): Promise<AdmissionDecision> {
    if (!this.hasFreeSlot) return { admitted: false, reason: 'no_free_slot' };
    // Claim the slot before the await so two admissions cannot both take the last one.
    this.reservations.set(key, reserveBytes);
    const reserved = [...this.reservations.values()].reduce((sum, bytes) => sum + bytes, 0);
    let free: number;
    try {
      free = await this.freeFor(reserved);
    } catch (error) {
      this.reservations.delete(key);
      throw error;
    }
    if (free < reserved) {
      this.reservations.delete(key);
      return {
        admitted: false,
        reason: 'no_disk_reserve',
        detail: `${free} bytes free on ${this.scratchRoot}, ${reserved} needed for ${this.reservations.size + 1} jobs`,
      };
    }
    return { admitted: true };
  }

  release(key: string): void {
    this.reservations.delete(key);
  }

  /**
   * The free space to weigh `reserved` against. A measure under freeBytesMaxAgeMs old that
   * has room for it stands (a statfs per job was a system call through the thread pool
   * for a figure that moves little): what the running jobs write meanwhile is already
   * counted, as each one's whole reserve is, so it misses only what others write. A
   * refusal is never made on an old measure.
   */
  private async freeFor(reserved: number): Promise<number> {
    const last = this.lastMeasure;
    if (last !== undefined && this.now() - last.at < freeBytesMaxAgeMs && last.free >= reserved) return last.free;
    const at = this.now();
    const free = await this.freeBytes(this.scratchRoot);
    this.lastMeasure = { free, at };
    return free;
  }
}

async function freeBytesOn(path: string): Promise<number> {
  const stats = await statfs(path);
  return stats.bavail * stats.bsize;
}
