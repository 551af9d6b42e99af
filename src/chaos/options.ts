/** Profiles and command-line options of `npm run chaos`. */
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { parseDuration } from '../core/duration.js';
import { faultKinds, defaultBehaviourWeights, type FaultKind } from './plan.js';
import type { ChaosOptions } from './run.js';

export const profiles = {
  /** CI: a few hundred jobs, every fault kind at least once, a few minutes at most. */
  short: { jobs: 300, durationMs: 60_000, workers: 3, slots: 2, drainTimeoutMs: 150_000 },
  /** By hand, before a release: ten minutes of faults, thousands of jobs. */
  long: { jobs: 3000, durationMs: 600_000, workers: 4, slots: 2, drainTimeoutMs: 600_000 },
} as const;
export type ProfileName = keyof typeof profiles;

export const usage = `usage: npm run chaos -- [options]

  --profile short|long   preset sizes (default short: 300 jobs, 60 s of faults, 3 workers)
  --jobs N               jobs to submit
  --duration S           length of the fault window (60, 90s, 10m); jobs are submitted across it
  --seed S               the seed (default: random, printed); the same seed replays the same plan
  --broker rabbitmq|embedded   rabbitmq (default): a RabbitMQ node of the run's own
  --workers N  --slots N  --lease-ttl D  --heartbeat D  --sweep D  --backoff D  --redispatch D
  --faults a,b,...       fault kinds to use (default all): ${faultKinds.join(', ')}
  --run-dir DIR          where the history, logs and report go (default: a temp folder,
                         removed after a passing run unless --keep)
  --keep                 keep the run folder after a passing run
  --plan-only            print the plan (fault schedule and job mix) and exit
  --json                 print report.json instead of the text report

exit code: 0 every invariant held; 1 a violation (or the run failed); 2 bad options or unsupported`;

export class UsageError extends Error {}

export interface ParsedArgs {
  options: ChaosOptions;
  broker: 'rabbitmq' | 'embedded';
  planOnly: boolean;
  json: boolean;
  profile: ProfileName;
}

export function parseChaosArgs(argv: string[], log: (message: string) => void): ParsedArgs {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        profile: { type: 'string' },
        jobs: { type: 'string' },
        duration: { type: 'string' },
        seed: { type: 'string' },
        broker: { type: 'string' },
        workers: { type: 'string' },
        slots: { type: 'string' },
        'lease-ttl': { type: 'string' },
        heartbeat: { type: 'string' },
        sweep: { type: 'string' },
        backoff: { type: 'string' },
        redispatch: { type: 'string' },
        faults: { type: 'string' },
        'run-dir': { type: 'string' },
        keep: { type: 'boolean' },
        'plan-only': { type: 'boolean' },
        json: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
    }));
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  if (values.help) throw new UsageError('');
  const profile = (values.profile ?? 'short') as ProfileName;
  if (!(profile in profiles)) throw new UsageError(`unknown profile "${values.profile}" (short or long)`);
  const preset = profiles[profile];
  const broker = (values.broker ?? 'rabbitmq') as 'rabbitmq' | 'embedded';
  if (broker !== 'rabbitmq' && broker !== 'embedded') throw new UsageError(`--broker must be rabbitmq or embedded, got "${values.broker}"`);
  const faults = values.faults === undefined ? [...faultKinds] : values.faults.split(',').map((f) => f.trim()).filter(Boolean);
  for (const f of faults) if (!(faultKinds as readonly string[]).includes(f)) throw new UsageError(`unknown fault kind "${f}"`);
  const leaseTtlMs = duration(values['lease-ttl'], 1000, '--lease-ttl');
  const options: ChaosOptions = {
    seed: values.seed ?? String(Date.now() % 1_000_000),
    jobs: int(values.jobs, preset.jobs, '--jobs', 1),
    durationMs: seconds(values.duration, preset.durationMs),
    workers: int(values.workers, preset.workers, '--workers', 1),
    slots: int(values.slots, preset.slots, '--slots', 1),
    leaseTtlMs,
    heartbeatMs: duration(values.heartbeat, 300, '--heartbeat'),
    sweepMs: duration(values.sweep, 200, '--sweep'),
    backoffMs: duration(values.backoff, 100, '--backoff'),
    redispatchMs: duration(values.redispatch, 5000, '--redispatch'),
    controlTimeoutMs: 1000,
    abortGraceMs: 1000,
    consumerTimeoutMs: 5000,
    drainTimeoutMs: preset.drainTimeoutMs,
    faultKinds: faults as FaultKind[],
    tenants: ['acme', 'globex', 'initech'],
    httpShare: 0.4,
    duplicateShare: 0.15,
    crossTenantKeyShare: 0.03,
    behaviourWeights: defaultBehaviourWeights,
    cli: fileURLToPath(new URL('../cli/main.js', import.meta.url)),
    jobTypesModule: fileURLToPath(new URL('./job-types.js', import.meta.url)),
    ...(values['run-dir'] === undefined ? {} : { runDir: values['run-dir'] }),
    keep: values.keep ?? false,
    log,
  };
  return { options, broker, planOnly: values['plan-only'] ?? false, json: values.json ?? false, profile };
}

function int(value: string | undefined, fallback: number, name: string, min: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < min) throw new UsageError(`${name} must be a whole number >= ${min}, got "${value}"`);
  return n;
}

function duration(value: string | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  try {
    return parseDuration(value);
  } catch (error) {
    throw new UsageError(`${name}: ${(error as Error).message}`);
  }
}

/** `--duration 90` means seconds; `90s`, `2m` as durations. */
function seconds(value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (/^\d+(\.\d+)?$/.test(value)) return Math.round(Number(value) * 1000);
  return duration(value, fallback, '--duration');
}
