/** Checks of the numbers callers pass in, shared by both brokers so they refuse the same things. */

export function requirePrefetch(prefetch: number): number {
  if (!Number.isInteger(prefetch) || prefetch < 1) {
    throw new RangeError(`prefetch must be a positive integer (got ${prefetch})`);
  }
  return prefetch;
}

/** How long a request waits for its reply: `waitMs` when given (never less than the request's timeout), else the timeout. */
export function requireWait(timeoutMs: number, waitMs: number | undefined): number {
  if (waitMs === undefined) return timeoutMs;
  const wait = requireTtl('waitMs', waitMs);
  if (wait < timeoutMs) throw new RangeError(`waitMs (${wait}) must not be shorter than timeoutMs (${timeoutMs})`);
  return wait;
}

/** A TTL in whole milliseconds, as AMQP carries it. */
export function requireTtl(name: string, ms: number): number {
  if (!Number.isFinite(ms) || ms <= 0) throw new RangeError(`${name} must be a positive number of milliseconds (got ${ms})`);
  return Math.ceil(ms);
}
