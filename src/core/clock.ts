/** All time in planrun comes through a Clock, so tests move time instead of sleeping. */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** A clock that only moves when told to. */
export class ManualClock implements Clock {
  constructor(private current = Date.UTC(2026, 0, 1)) {}
  now(): number {
    return this.current;
  }
  advance(ms: number): void {
    if (ms < 0) throw new RangeError(`a clock cannot go backwards (advance by ${ms} ms)`);
    this.current += ms;
  }
  set(ms: number): void {
    this.current = ms;
  }
}
