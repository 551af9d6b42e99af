/**
 * In-process notifications that a job changed: its state (submit, lease, settle, sweep,
 * cancel, reject) or its progress, whether through this orchestrator or, told by the
 * ledger's change feed, through another sharing its ledger. They carry only the job id: a listener
 * reads the job from the ledger, which stays the one record, so a missed or reordered
 * notification can never show a state that was not committed.
 */
export interface JobChange {
  jobId: string;
  kind: 'state' | 'progress';
}

export class JobEvents {
  private readonly byJob = new Map<string, Set<(change: JobChange) => void>>();
  private readonly all = new Set<(change: JobChange) => void>();

  /** Listens to one job's changes; returns the function that stops listening. */
  onJob(jobId: string, listener: (change: JobChange) => void): () => void {
    let listeners = this.byJob.get(jobId);
    if (!listeners) this.byJob.set(jobId, (listeners = new Set()));
    listeners.add(listener);
    return () => {
      listeners.delete(listener);
      if (listeners.size === 0) this.byJob.delete(jobId);
    };
  }

  /** Listens to every job's changes. */
  onAny(listener: (change: JobChange) => void): () => void {
    this.all.add(listener);
    return () => this.all.delete(listener);
  }

  /** Tells every listener of one job to look again (changes may have gone unheard). */
  touchAll(): void {
    for (const jobId of [...this.byJob.keys()]) this.emit({ jobId, kind: 'state' });
  }

  emit(change: JobChange): void {
    for (const listener of this.byJob.get(change.jobId) ?? []) listener(change);
    for (const listener of this.all) listener(change);
  }
}
