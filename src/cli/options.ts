import { InvalidArgumentError } from 'commander';
import { parseDuration } from '../core/duration.js';

/** Commander parsers that fail loudly, naming what was expected. */
export function durationOption(value: string): number {
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

export function bytesOption(value: string): number {
  const match = /^(\d+)\s*(b|k|kb|kib|m|mb|mib|g|gb|gib)?$/i.exec(value.trim());
  if (!match) throw new InvalidArgumentError(`expected a size such as 512k, 64m or 2g, got "${value}"`);
  const unit = (match[2] ?? 'b').toLowerCase()[0]!;
  const factor = { b: 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[unit as 'b' | 'k' | 'm' | 'g'];
  return Number(match[1]) * factor;
}

export function listOption(value: string): string[] {
  return value
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);
}

/** For repeatable options: `--jobs a.js --jobs b.js`. */
export function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

/** The RabbitMQ URL from `--amqp` or PLANRUN_AMQP_URL, if either is set. */
export function amqpUrl(flag: string | undefined): string | undefined {
  return flag ?? process.env.PLANRUN_AMQP_URL ?? undefined;
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

export class UsageError extends Error {
  override readonly name = 'UsageError';
}
