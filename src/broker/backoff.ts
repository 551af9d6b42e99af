export interface BackoffOptions {
  initialMs: number;
  maxMs: number;
}

/** Capped exponential backoff: `initialMs`, doubling with each failure up to `maxMs`, until `reset`. */
export class Backoff {
  private failures = 0;

  constructor(private readonly options: BackoffOptions) {}

  next(): number {
    const delay = Math.min(this.options.maxMs, this.options.initialMs * 2 ** this.failures);
    this.failures++;
    return delay;
  }

  reset(): void {
    this.failures = 0;
  }
}
