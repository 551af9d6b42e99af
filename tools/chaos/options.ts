/** Profiles and command-line options of `npm run chaos`. */
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { parseDuration } from '../../src/core/duration.js';
import { allFaultKinds, faultKinds, defaultBehaviourWeights, embeddedFaultKinds, haFaultKinds, type FaultKind } from './plan.js';
import { behaviours, type Behaviour } from './job-input.js';
import type { ChaosOptions } from './run.js';
import type { ChaosStoreKind } from './store.js';

export const profiles = {
  /** CI: a few hundred jobs, every fault kind at least once, a few minutes at most. */
  short: { jobs: 300, durationMs: 60_000, workers: 3, slots: 2, drainTimeoutMs: 150_000, redispatchMs: 5000 },
  /**
   * By hand, before a release: ten minutes of faults, 2000 jobs (about what 4 workers of 2
   * slots finish in that time under the faults; more only builds a backlog). The sweeper
   * re-sends the work message of every queued job unleased for `redispatch`, backlog or
   * not, so a longer one keeps a backlog from flooding the queue with copies.
   */
  long: { jobs: 2000, durationMs: 600_000, workers: 4, slots: 2, drainTimeoutMs: 900_000, redispatchMs: 15_000 },
  /**
   * No single point of failure (docs/high-availability.md): three orchestrators on a
   * private PostgreSQL, a RabbitMQ cluster of three with quorum queues; 40 s of faults, so
   * that CI runs it in about three minutes with the cluster's start.
   */
  ha: { jobs: 150, durationMs: 40_000, workers: 3, slots: 2, drainTimeoutMs: 120_000, redispatchMs: 5000 },
} as const;
export type ProfileName = keyof typeof profiles;

export const usage = `usage: npm run chaos -- [options]

  --profile short|long|ha   preset sizes (default short: 300 jobs, 60 s of faults, 3 workers);
                         ha: 3 orchestrators on a private PostgreSQL (each through a fault
                         proxy), a 3-node RabbitMQ cluster with quorum queues, 150 jobs over
                         40 s of faults (${haFaultKinds.join(', ')}); prints the failover figures
  --jobs N               jobs to submit
  --duration S           length of the fault window (60, 90s, 10m); jobs are submitted across it
  --seed S               the seed (default: random, printed); the same seed replays the same plan
  --broker rabbitmq|embedded   rabbitmq (default): a RabbitMQ node of the run's own;
                         embedded: the orchestrator runs the embedded broker, workers
                         reach it over Unix sockets (no broker-* or orchestrator-partition
                         faults: the broker lives and dies with the orchestrator)
  --store folder|s3      folder (default): each worker's output folder; s3: an s3rver of
                         the run's own, the orchestrator handing out upload URLs and
                         removing what losing attempts left after --store-cleanup-grace
                         (default 2s); the output invariants are checked over the store
  --workers N  --slots N  --lease-ttl D  --heartbeat D  --sweep D  --backoff D  --redispatch D
  --grant-window D|off   the orchestrator's --grant-window (default half the lease TTL:
                         a grant nobody takes up goes back to queued at the same attempt
                         before it could expire; the report counts these abandons)
  --faults a,b,...       fault kinds to use (default all that apply): ${faultKinds.join(', ')}
                         (ha: ${haFaultKinds.join(', ')})
  --run-ms MIN-MAX       how long a job works (default 50-1000; long and hang jobs aside)
  --mix k=w,...          job behaviours and their weights (default ${Object.entries(defaultBehaviourWeights)
    .map(([k, w]) => `${k}=${w}`)
    .join(',')})
  --run-dir DIR          where the history, logs and report go (default: a temp folder,
                         removed after a passing run unless --keep)
  --keep                 keep the run folder after a passing run
  --plan-only            print the plan (fault schedule and job mix) and exit
  --json                 print report.json instead of the text report

exit code: 0 every invariant held; 1 a violation (or the run failed); 2 bad options`;

export class UsageError extends Error {}

export interface ParsedArgs {
  options: ChaosOptions;
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
        store: { type: 'string' },
        'store-cleanup-grace': { type: 'string' },
        workers: { type: 'string' },
        slots: { type: 'string' },
        'lease-ttl': { type: 'string' },
        heartbeat: { type: 'string' },
        sweep: { type: 'string' },
        backoff: { type: 'string' },
        redispatch: { type: 'string' },
        'grant-window': { type: 'string' },
        faults: { type: 'string' },
        'run-ms': { type: 'string' },
        mix: { type: 'string' },
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
  if (!(profile in profiles)) throw new UsageError(`unknown profile "${values.profile}" (short, long or ha)`);
  const ha = profile === 'ha';
  const preset = profiles[profile];
  const broker = (values.broker ?? 'rabbitmq') as 'rabbitmq' | 'embedded';
  if (broker !== 'rabbitmq' && broker !== 'embedded') throw new UsageError(`--broker must be rabbitmq or embedded, got "${values.broker}"`);
  if (ha && broker !== 'rabbitmq') throw new UsageError('--profile ha runs on a RabbitMQ cluster: --broker embedded does not apply');
  const store = (values.store ?? 'folder') as ChaosStoreKind;
  if (store !== 'folder' && store !== 's3') throw new UsageError(`--store must be folder or s3, got "${values.store}"`);
  if (store !== 's3' && values['store-cleanup-grace'] !== undefined) throw new UsageError('--store-cleanup-grace goes with --store s3');
  const applicable: readonly FaultKind[] = ha ? haFaultKinds : broker === 'embedded' ? embeddedFaultKinds : faultKinds;
  const faults =
    values.faults === undefined
      ? [...applicable]
      : values.faults
          .split(',')
          .map((f) => f.trim())
          .filter(Boolean);
  for (const f of faults) {
    if (!(allFaultKinds as readonly string[]).includes(f)) throw new UsageError(`unknown fault kind "${f}"`);
    if (ha && !(applicable as readonly string[]).includes(f)) {
      throw new UsageError(
        `fault kind "${f}" does not apply to --profile ha (${haFaultKinds.join(', ')}): its processes reach the cluster's nodes without a proxy`,
      );
    }
    if (!ha && f.startsWith('ledger-')) throw new UsageError(`fault kind "${f}" needs the private PostgreSQL of --profile ha`);
    if (!(applicable as readonly string[]).includes(f)) {
      throw new UsageError(`fault kind "${f}" does not apply to the embedded broker, which lives and dies with the orchestrator (use orchestrator-kill)`);
    }
  }
  const leaseTtlMs = duration(values['lease-ttl'], 1000, '--lease-ttl');
  const grantWindowMs = values['grant-window'] === 'off' ? null : duration(values['grant-window'], Math.round(leaseTtlMs / 2), '--grant-window');
  if (grantWindowMs !== null && grantWindowMs >= leaseTtlMs) {
    throw new UsageError(`--grant-window must be shorter than the lease TTL (${leaseTtlMs} ms), or off: a longer one never fires before the lease expires`);
  }
  const options: ChaosOptions = {
    seed: values.seed ?? String(Date.now() % 1_000_000),
    broker,
    ha,
    store,
    storeCleanupGraceMs: duration(values['store-cleanup-grace'], 2000, '--store-cleanup-grace'),
    jobs: int(values.jobs, preset.jobs, '--jobs', 1),
    durationMs: seconds(values.duration, preset.durationMs),
    workers: int(values.workers, preset.workers, '--workers', 1),
    slots: int(values.slots, preset.slots, '--slots', 1),
    leaseTtlMs,
    grantWindowMs,
    heartbeatMs: duration(values.heartbeat, 300, '--heartbeat'),
    sweepMs: duration(values.sweep, 200, '--sweep'),
    backoffMs: duration(values.backoff, 100, '--backoff'),
    redispatchMs: duration(values.redispatch, preset.redispatchMs, '--redispatch'),
    controlTimeoutMs: 1000,
    abortGraceMs: 1000,
    adversaryIntervalMs: 500,
    consumerTimeoutMs: 5000,
    drainTimeoutMs: preset.drainTimeoutMs,
    faultKinds: faults as FaultKind[],
    tenants: ['acme', 'globex', 'initech'],
    httpShare: 0.4,
    duplicateShare: 0.15,
    crossTenantKeyShare: 0.03,
    behaviourWeights: mix(values.mix),
    runMs: range(values['run-ms'], [50, 1000]),
    cli: fileURLToPath(new URL('../../src/cli/main.js', import.meta.url)),
    jobTypesModule: fileURLToPath(new URL('./job-types.js', import.meta.url)),
    ...(values['run-dir'] === undefined ? {} : { runDir: values['run-dir'] }),
    keep: values.keep ?? false,
    log,
  };
  return { options, planOnly: values['plan-only'] ?? false, json: values.json ?? false, profile };
}

function mix(value: string | undefined): Record<Behaviour, number> {
  if (value === undefined) return { ...defaultBehaviourWeights };
  const weights = Object.fromEntries(behaviours.map((b) => [b, 0])) as Record<Behaviour, number>;
  for (const part of value.split(',')) {
    const [name, weight] = part.split('=');
    if (!(behaviours as readonly string[]).includes(name ?? '') || !/^\d+$/.test(weight ?? '')) {
      throw new UsageError(`--mix takes behaviour=weight pairs (behaviours: ${behaviours.join(', ')}), got "${part}"`);
    }
    weights[name as Behaviour] = Number(weight);
  }
  if (Object.values(weights).every((w) => w === 0)) throw new UsageError('--mix: every weight is 0');
  return weights;
}

function range(value: string | undefined, fallback: [number, number]): [number, number] {
  if (value === undefined) return fallback;
  const match = /^(\d+)-(\d+)$/.exec(value);
  if (!match || Number(match[1]) > Number(match[2])) throw new UsageError(`--run-ms must be MIN-MAX in ms (e.g. 50-1000), got "${value}"`);
  return [Number(match[1]), Number(match[2])];
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
