/**
 * A bounded memory of the (job, attempt) pairs this worker is running or has just
 * finished, so a repeated delivery is dropped before any work or any ledger call.
 * Oldest entries are forgotten first; the ledger's lease refusal covers what is forgotten.
 */
export class DedupMemory {
  private readonly seen = new Set<string>();

  constructor(private readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`dedup capacity must be a positive integer, got ${capacity}`);
  }

  private static key(jobId: string, attempt: number): string {
    return `${jobId}@${attempt}`;
  }

  has(jobId: string, attempt: number): boolean {
    return this.seen.has(DedupMemory.key(jobId, attempt));
  }

  remember(jobId: string, attempt: number): void {
    const key = DedupMemory.key(jobId, attempt);
    this.seen.delete(key);
    this.seen.add(key);
    // A Set iterates in insertion order, so its first entry is the oldest.
    while (this.seen.size > this.capacity) this.seen.delete(this.seen.values().next().value as string);
  }

  forget(jobId: string, attempt: number): void {
    this.seen.delete(DedupMemory.key(jobId, attempt));
  }
}
