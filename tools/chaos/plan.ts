/**
 * The plan of a chaos run, made from its seed alone: the fault schedule the nemesis
 * follows and the jobs the submitter sends (what each one does, for which tenant, under
 * which idempotency key, over which transport, when, and whether it is sent twice).
 *
 * The fault schedule and the jobs come from two independent streams of the generator,
 * so `--jobs` does not change the faults and the fault options do not change the jobs.
 * The same seed and options replay the same plan; `fingerprint` says so in one word.
 */
import { createHash } from 'node:crypto';
import { chaosOutputReserveBytes, type Behaviour, type ChaosInput } from './job-input.js';
import { Rng } from './rng.js';

export const faultKinds = [
  'worker-kill',
  'worker-pause',
  'worker-partition',
  'worker-latency',
  'broker-restart',
  'broker-kill',
  'orchestrator-kill',
  'orchestrator-partition',
] as const;
/**
 * Faults of the PostgreSQL ledger, which only `--profile ha` has: `ledger-restart` restarts
 * the run's private PostgreSQL (`pg_ctl restart -m fast`), `ledger-cut` black-holes one
 * orchestrator's connection to it.
 */
export const ledgerFaultKinds = ['ledger-restart', 'ledger-cut'] as const;
export type FaultKind = (typeof faultKinds)[number] | (typeof ledgerFaultKinds)[number];
export const allFaultKinds: readonly FaultKind[] = [...faultKinds, ...ledgerFaultKinds];

/** What applies when the orchestrator runs the embedded broker: a broker fault is an orchestrator kill. */
export const embeddedFaultKinds: readonly FaultKind[] = faultKinds.filter((kind) => !kind.startsWith('broker-') && kind !== 'orchestrator-partition');

/**
 * What applies to `--profile ha`: orchestrators and workers reach the cluster's nodes
 * directly (no proxy in front of each node, so no partitions or latency on the broker's
 * side); the nemesis picks which orchestrator and which node.
 */
export const haFaultKinds: readonly FaultKind[] = ['worker-kill', 'worker-pause', 'orchestrator-kill', 'broker-kill', 'broker-restart', ...ledgerFaultKinds];

export interface PlannedFault {
  id: number;
  kind: FaultKind;
  /** `w1`...: a worker; `orchestrator` (or `o1`... with several); `broker` (or `rabbit-1`... in a cluster); `ledger`. */
  target: string;
  /** When it starts, from the start of the run (the nemesis may start it later, never earlier). */
  atMs: number;
  /** How long it lasts before it is healed (for kills: how long the process stays down). */
  durationMs: number;
  /** worker-latency: the delay added to every chunk, each way. */
  latencyMs?: number;
}

export type Transport = 'queue' | 'http';

export interface PlannedSubmission {
  atMs: number;
  transport: Transport;
}

export interface PlannedJob {
  index: number;
  tenant: string;
  key: string;
  type: 'chaos';
  input: ChaosInput;
  maxAttempts: number;
  /** The first submission, then any repeats of it (same tenant, key and body). */
  submissions: PlannedSubmission[];
}

export interface PlanParams {
  seed: string;
  jobs: number;
  /** The fault window: faults are scheduled until it is full, and jobs are submitted across it. */
  durationMs: number;
  workers: number;
  /** Several orchestrators (`--profile ha`): each fault on one picks which (default 1). */
  orchestrators?: number;
  /** A cluster's nodes (`--profile ha`): each broker fault picks which (default 1). */
  brokerNodes?: number;
  leaseTtlMs: number;
  /** Fault kinds used; each one is scheduled at least once. */
  faultKinds: readonly FaultKind[];
  tenants: readonly string[];
  /** Share of jobs first sent over HTTP (when the API is there; otherwise over the queue). */
  httpShare: number;
  /** Share of jobs sent a second time with the same key. */
  duplicateShare: number;
  /** Share of jobs whose key is one another tenant already used (they must stay two jobs). */
  crossTenantKeyShare: number;
  behaviourWeights: Readonly<Record<Behaviour, number>>;
  /** How long a job works, ms (long and hang jobs aside); default 50 to 1000. */
  runMs?: readonly [number, number];
}

export interface Plan {
  params: PlanParams;
  faults: PlannedFault[];
  jobs: PlannedJob[];
  /** sha256 (first 16 hex) of the fault schedule, and of the jobs. */
  fingerprint: { faults: string; jobs: string };
}

export const defaultBehaviourWeights: Readonly<Record<Behaviour, number>> = {
  ok: 52,
  long: 3,
  permanent: 8,
  transient: 10,
  crash: 8,
  hang: 5,
  'over-reserve': 6,
  fatal: 2,
};

/** Time before the first fault, so that jobs are running when it hits. */
const warmupMs = 3000;

export function makePlan(params: PlanParams): Plan {
  const root = new Rng(params.seed);
  const faultRng = root.fork('faults');
  const jobRng = root.fork('jobs');
  const faults = planFaults(faultRng, params);
  const jobs = planJobs(jobRng, params);
  return {
    params,
    faults,
    jobs,
    fingerprint: { faults: digest(faults), jobs: digest(jobs) },
  };
}

function planFaults(rng: Rng, params: PlanParams): PlannedFault[] {
  const faults: PlannedFault[] = [];
  if (params.faultKinds.length === 0) return faults;
  const workers = Array.from({ length: params.workers }, (_, i) => `w${i + 1}`);
  const targets = { workers, orchestrators: orchestratorNames(params.orchestrators ?? 1), brokers: brokerNodeNames(params.brokerNodes ?? 1) };
  // Every kind once, in a seeded order; then seeded kinds until the window is full.
  const kinds: FaultKind[] = rng.shuffle(params.faultKinds);
  let at = warmupMs;
  for (let i = 0; ; i++) {
    const kind = i < kinds.length ? kinds[i]! : rng.pick(params.faultKinds);
    const fault = planFault(rng, kind, faults.length + 1, at, targets, params.leaseTtlMs);
    if (i >= kinds.length && fault.atMs + fault.durationMs > params.durationMs) break;
    faults.push(fault);
    // A gap after each fault; longer after the broker ones, whose heal takes a while itself.
    const settle = kind === 'broker-kill' || kind === 'broker-restart' || kind === 'ledger-restart' ? 3000 : 0;
    at = fault.atMs + fault.durationMs + settle + rng.int(1500, 4000);
  }
  return faults;
}

/** `orchestrator` alone; `o1`... when there are several. */
export function orchestratorNames(n: number): string[] {
  return n === 1 ? ['orchestrator'] : Array.from({ length: n }, (_, i) => `o${i + 1}`);
}

/** `broker` alone; `rabbit-1`... for a cluster's nodes. */
export function brokerNodeNames(n: number): string[] {
  return n === 1 ? ['broker'] : Array.from({ length: n }, (_, i) => `rabbit-${i + 1}`);
}

interface FaultTargets {
  workers: string[];
  orchestrators: string[];
  brokers: string[];
}

function planFault(rng: Rng, kind: FaultKind, id: number, atMs: number, targets: FaultTargets, leaseTtlMs: number): PlannedFault {
  const worker = () => rng.pick(targets.workers);
  // One of one is no choice: drawn only when there are several, so that the plans of the
  // one-orchestrator profiles stay as they were for their seeds.
  const one = (names: string[]) => (names.length === 1 ? names[0]! : rng.pick(names));
  const orchestrator = () => one(targets.orchestrators);
  const broker = () => one(targets.brokers);
  switch (kind) {
    case 'worker-kill':
      return { id, kind, target: worker(), atMs, durationMs: rng.int(300, 2000) };
    case 'worker-pause':
      // Longer than the lease TTL, so the ledger hands the jobs on while the worker is frozen.
      return { id, kind, target: worker(), atMs, durationMs: rng.int(3 * leaseTtlMs + 500, 4 * leaseTtlMs + 1500) };
    case 'worker-partition':
      // Short cuts leave the AMQP connection alive (held bytes flow at the heal); long ones
      // (over two 5 s AMQP heartbeats) make both ends drop it.
      return { id, kind, target: worker(), atMs, durationMs: rng.int(2000, 14_000) };
    case 'worker-latency':
      return { id, kind, target: worker(), atMs, durationMs: rng.int(3000, 8000), latencyMs: rng.int(100, 500) };
    case 'broker-restart':
      return { id, kind, target: broker(), atMs, durationMs: rng.int(500, 3000) };
    case 'broker-kill':
      return { id, kind, target: broker(), atMs, durationMs: rng.int(0, 2000) };
    case 'orchestrator-kill':
      return { id, kind, target: orchestrator(), atMs, durationMs: rng.int(200, 2000) };
    case 'orchestrator-partition':
      return { id, kind, target: orchestrator(), atMs, durationMs: rng.int(2000, 8000) };
    case 'ledger-restart':
      // pg_ctl restart: the server is down for as long as the restart takes.
      return { id, kind, target: 'ledger', atMs, durationMs: 0 };
    case 'ledger-cut':
      // Longer than the readiness probe's 2 s: the orchestrator answers /readyz 503 meanwhile.
      return { id, kind, target: orchestrator(), atMs, durationMs: rng.int(2000, 6000) };
  }
}

function planJobs(rng: Rng, params: PlanParams): PlannedJob[] {
  const times = Array.from({ length: params.jobs }, () => rng.int(0, Math.max(0, params.durationMs - 1))).sort((a, b) => a - b);
  const jobs: PlannedJob[] = [];
  const used = new Set<string>();
  for (let index = 0; index < params.jobs; index++) {
    const tenant = rng.pick(params.tenants);
    const behaviour = rng.weighted(params.behaviourWeights);
    const maxAttempts = rng.int(3, 5);
    const input = planInput(rng, behaviour, maxAttempts, params.runMs ?? [50, 1000]);
    // Some keys repeat one of another tenant: the ledger must keep those two jobs apart.
    const other = jobs.length > 0 && rng.chance(params.crossTenantKeyShare) ? rng.pick(jobs) : undefined;
    const fresh = `k-${index}-${rng.hex(8)}`;
    const key = other && !used.has(`${tenant}\u0000${other.key}`) ? other.key : fresh;
    used.add(`${tenant}\u0000${key}`);
    const at = times[index]!;
    const submissions: PlannedSubmission[] = [{ atMs: at, transport: rng.chance(params.httpShare) ? 'http' : 'queue' }];
    if (rng.chance(params.duplicateShare)) {
      submissions.push({ atMs: at + rng.int(0, 6000), transport: rng.chance(params.httpShare) ? 'http' : 'queue' });
    }
    jobs.push({ index, tenant, key, type: 'chaos', input, maxAttempts, submissions });
  }
  return jobs;
}

function planInput(rng: Rng, behaviour: Behaviour, maxAttempts: number, runRange: readonly [number, number]): ChaosInput {
  const nonce = rng.hex(12);
  const runMs = rng.int(runRange[0], runRange[1]);
  const outputBytes = rng.int(1024, 16 * 1024);
  switch (behaviour) {
    case 'ok':
    case 'permanent':
      return { behaviour, runMs, outputBytes, nonce };
    case 'long':
      // Past the chaos node's 5 s consumer timeout: only ack-early keeps it from the cliff.
      return { behaviour, runMs: rng.int(6000, 8000), outputBytes, nonce };
    case 'transient':
    case 'crash':
      // Fails on the attempts before `failUntil`; past maxAttempts it never succeeds.
      return { behaviour, runMs, outputBytes, failUntil: rng.int(2, maxAttempts + 1), nonce };
    case 'hang':
      return { behaviour, runMs, outputBytes, hangMs: rng.int(3000, 6000), nonce };
    case 'over-reserve':
      return { behaviour, runMs, outputBytes: rng.int(4 * chaosOutputReserveBytes, 16 * chaosOutputReserveBytes), nonce };
    case 'fatal':
      return { behaviour, runMs, outputBytes, nonce };
  }
}

function digest(value: unknown): string {
  return createHash('sha256').update(JSON.stringify(value)).digest('hex').slice(0, 16);
}

/** One line per fault, for the report and `--plan-only`. */
export function describeFault(fault: PlannedFault): string {
  const extra = fault.latencyMs === undefined ? '' : ` +${fault.latencyMs}ms`;
  return `#${fault.id} ${fault.kind} ${fault.target}${extra} at ${(fault.atMs / 1000).toFixed(1)}s for ${(fault.durationMs / 1000).toFixed(1)}s`;
}
