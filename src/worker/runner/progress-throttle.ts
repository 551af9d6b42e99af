export interface ProgressReport {
  fraction: number;
  message?: string;
}

/**
 * Lets at most one progress report per interval through to `emit`, always the newest one.
 * The first report passes at once (a watcher sees the job start) and `close()` emits the
 * one still waiting (the last report, usually 100 %, is never lost). Jobs may report in a
 * tight loop; only what a person watching could notice crosses the process boundary.
 */
export class ProgressThrottle {
  private lastEmittedAt = Number.NEGATIVE_INFINITY;
  private waiting: ProgressReport | undefined;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly intervalMs: number,
    private readonly emit: (report: ProgressReport) => void,
    private readonly now: () => number = Date.now,
  ) {}

  report(report: ProgressReport): void {
    if (this.closed) return;
    this.waiting = report;
    const waitMs = this.lastEmittedAt + this.intervalMs - this.now();
    if (waitMs <= 0) this.emitWaiting();
    else this.timer ??= setTimeout(() => this.emitWaiting(), waitMs);
  }

  /** Emits the report still waiting, if any, and ignores every later one. */
  close(): void {
    if (this.closed) return;
    this.emitWaiting();
    this.closed = true;
  }

  private emitWaiting(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const report = this.waiting;
    if (report === undefined) return;
    this.waiting = undefined;
    this.lastEmittedAt = this.now();
    this.emit(report);
  }
}
