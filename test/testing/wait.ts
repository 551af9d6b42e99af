import { setTimeout as delay } from 'node:timers/promises';

/**
 * Polls `check` every few milliseconds until it returns a truthy value, and returns it;
 * fails with `what` after `timeoutMs`. Tests wait on conditions, not on fixed sleeps.
 */
export async function waitFor<T>(what: string, check: () => T | Promise<T>, timeoutMs = 10_000, everyMs = 20): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await delay(everyMs);
  }
}
