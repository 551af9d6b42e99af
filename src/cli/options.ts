import { InvalidArgumentError, Option } from 'commander';
import { parseRateLimit, type RateLimit } from '../api/rate-limit.js';
import { formatDuration, parseDuration } from '../core/duration.js';

/**
 * Commander parsers that fail loudly, naming what was expected. A duration needs its
 * unit: a bare number is refused (`--lease-ttl 90` once meant 90 ms, silently).
 */
export function durationOption(value: string): number {
  const bare = /^\s*(\d+(?:\.\d+)?)\s*$/.exec(value);
  if (bare) {
    const n = Number(bare[1]);
    // 90 was meant as seconds far more often than as milliseconds; 30000 the other way round.
    const guess = n >= 1000 ? `${bare[1]}ms` : `${bare[1]}s`;
    throw new InvalidArgumentError(`"${value.trim()}" has no unit: ${guess}? (a duration reads like 500ms, 4s, 2m, 1h)`);
  }
  try {
    return parseDuration(value);
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
}

export function positiveIntOption(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`expected a whole number of at least 1, got "${value}"`);
  return n;
}

export function rateLimitOption(value: string): RateLimit | 'off' {
  try {
    return parseRateLimit(value);
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
}

const byteUnits = { b: 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 } as const;

export function bytesOption(value: string): number {
  const match = /^(\d+)\s*(b|k|kb|kib|m|mb|mib|g|gb|gib)?$/i.exec(value.trim());
  if (!match) throw new InvalidArgumentError(`expected a size such as 512k, 64m or 2g, got "${value}"`);
  const unit = (match[2] ?? 'b').toLowerCase()[0] as keyof typeof byteUnits;
  return Number(match[1]) * byteUnits[unit];
}

/** A size as a user writes it: `64m`, `2g`, `512k`, else bytes. */
export function formatBytes(bytes: number): string {
  for (const unit of ['g', 'm', 'k'] as const) {
    if (bytes > 0 && bytes % byteUnits[unit] === 0) return `${bytes / byteUnits[unit]}${unit}`;
  }
  return String(bytes);
}

/** `--flag <duration>`, its default shown in `--help` as a user writes it (`90s`, not 90000). */
export function durationFlag(flags: string, description: string, defaultMs?: number): Option {
  const option = new Option(flags, description).argParser(durationOption);
  return defaultMs === undefined ? option : option.default(defaultMs, formatDuration(defaultMs));
}

/** `--flag <size>`, its default shown in `--help` as a user writes it (`64m`). */
export function sizeFlag(flags: string, description: string, defaultBytes: number): Option {
  return new Option(flags, description).argParser(bytesOption).default(defaultBytes, formatBytes(defaultBytes));
}

export function listOption(value: string): string[] {
  return value
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);
}

/** For repeatable options: `--jobs a.js --jobs b.js` (absent: undefined, so `--help` shows no `[]` default). */
export function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

/** The ledger from `--ledger` or PLANRUN_LEDGER, as an option object (absent means SQLite). */
export function ledgerChoice(flag: string | undefined): { ledger?: string } {
  const choice = flag ?? process.env.PLANRUN_LEDGER;
  return choice ? { ledger: choice } : {};
}

/** The metrics listener from `--metrics-port`/`--metrics-host`, as an option object (absent: metrics on the API port, behind a key). */
export function metricsListener(flags: { metricsHost: string; metricsPort?: number }): { metrics?: { host: string; port: number } } {
  return flags.metricsPort === undefined ? {} : { metrics: { host: flags.metricsHost, port: flags.metricsPort } };
}

/**
 * A lease must outlive a missed heartbeat: a TTL under two heartbeat intervals loses
 * leases of healthy workers (they show up as `lease_expired` attempts). Checked wherever
 * both are known (`planrun up`); run separately, the orchestrator's `--lease-ttl` and its
 * workers' `--heartbeat-interval` must keep this rule between them.
 */
export const minHeartbeatsPerLease = 2;

export function checkLeaseTiming(leaseTtlMs: number, heartbeatIntervalMs: number): void {
  if (leaseTtlMs >= minHeartbeatsPerLease * heartbeatIntervalMs) return;
  throw new UsageError(
    `--lease-ttl ${formatDuration(leaseTtlMs)} is shorter than ${minHeartbeatsPerLease} × --heartbeat-interval ${formatDuration(heartbeatIntervalMs)}: ` +
      `leases would run out between heartbeats and jobs would lose their attempts to lease_expired. ` +
      `Give --lease-ttl at least ${formatDuration(minHeartbeatsPerLease * heartbeatIntervalMs)}, or a shorter --heartbeat-interval.`,
  );
}

export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** A command that failed for a reason its own exit code names (README, "Exit codes"): one line on stderr, no stack. */
export class CommandFailure extends Error {
  override readonly name = 'CommandFailure';
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}
