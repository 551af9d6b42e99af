import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance } from 'fastify';
import { ApiError, ApiErrorCode } from './errors.js';

/** At most `max` requests per key in each window of `windowMs`. */
export interface RateLimit {
  max: number;
  windowMs: number;
}

/**
 * Generous: a client submitting one job at a time in a tight loop stays under it, a batch
 * of 1,000 jobs counts once, and a runaway loop or a leaked key is held to it.
 */
export const defaultRateLimit: RateLimit = { max: 100, windowMs: 1000 };

const windows = { s: 1000, min: 60_000, h: 3_600_000 } as const;
const windowNames: Record<string, keyof typeof windows> = { s: 's', sec: 's', second: 's', m: 'min', min: 'min', minute: 'min', h: 'h', hour: 'h' };

/** `100/s`, `600/min`, `5000/h`; `off` for no limit. Throws a RangeError naming the forms it takes. */
export function parseRateLimit(text: string): RateLimit | 'off' {
  const value = text.trim().toLowerCase();
  if (value === 'off') return 'off';
  const match = /^(\d+)\s*\/\s*([a-z]+)$/.exec(value);
  const window = match ? windowNames[match[2]!] : undefined;
  const max = match ? Number(match[1]) : 0;
  if (!window || !Number.isSafeInteger(max) || max < 1) {
    throw new RangeError(`expected requests per key and window such as 100/s, 600/min or 5000/h (or off), got "${text}"`);
  }
  return { max, windowMs: windows[window] };
}

/** A limit as a user writes it: `100/s`. */
export function formatRateLimit(limit: RateLimit | 'off'): string {
  if (limit === 'off') return 'off';
  const window = (Object.keys(windows) as Array<keyof typeof windows>).find((name) => windows[name] === limit.windowMs);
  return window ? `${limit.max}/${window}` : `${limit.max}/${limit.windowMs}ms`;
}

/**
 * Holds every route of `scope` to `limit`, one budget per API key shared by all those
 * routes (not per route, not per IP: many clients share an address behind a proxy, and
 * one key is one client). Call it on a scope that already authenticates, before its
 * routes are added: the count runs after the key is checked, so a request without a
 * working key is a 401 and spends nothing, and before the body is read, so a limited
 * caller cannot make the server parse a large one. Answers 429 `rate_limited` with
 * `Retry-After` (seconds) and the `x-ratelimit-*` headers.
 */
export async function limitRequestsPerKey(scope: FastifyInstance, limit: RateLimit): Promise<void> {
  await scope.register(rateLimit, {
    // Every route of the scope, counted in one store: the routes share the budget.
    global: true,
    hook: 'onRequest',
    max: limit.max,
    timeWindow: limit.windowMs,
    keyGenerator: (request) => request.caller.id,
    errorResponseBuilder: (_request, context) =>
      new ApiError(429, ApiErrorCode.rateLimited, `this API key is over its submission limit (${formatRateLimit(limit)}); retry in ${context.after}`),
  });
}
