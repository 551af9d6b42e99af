/**
 * What one benchmark run measures, and how much: the full profile (what
 * docs/benchmarks.md shows), the quick one (`--quick`, a minute or two), and any counts
 * overridden on top (the CI smoke test shrinks them to seconds).
 */
import type { DispatchMode } from '../../src/ledger/ledger.js';

export interface BenchProfile {
  name: 'full' | 'quick';
  /** Sections (1) and (1e): messages published and consumed through raw amqplib, and through the embedded broker. */
  transportMessages: number;
  /** Sections (1) and (1e): prefetch of the consumer (the limit gets the broker's best settings). */
  transportPrefetch: number;
  /** Sections (2)-(5): no-op jobs submitted in bulk. */
  jobs: number;
  /** Jobs run before measuring, so every system is measured warm. */
  warmupJobs: number;
  /** Sections (2)-(4): jobs submitted one at a time for the low-load latency. */
  latencySamples: number;
  /** Worker processes, each with `slots` job slots (BullMQ: `slots` concurrency). */
  workers: number;
  slots: number;
  /** Jobs per submitMany / addBulk call. */
  submitChunk: number;
  /** Long-job costs: concurrent leases renewed by simulated workers. */
  heartbeatLeases: number;
  heartbeatWorkers: number;
  heartbeatIntervals: number;
  /** Long-job costs: leases expired, in one ledger pass and by the orchestrator's sweeper. */
  sweepLeases: number;
  /** Long-job costs: jobs left queued with no worker, to measure the orchestrator's memory (fair dispatch, the default). */
  queuedJobs: number;
  /** The same with fifo dispatch, where every queued job's work message is held by the embedded broker. */
  queuedJobsFifo: number;
  /** Jobs per submitMany call (and grants issued together) when the long-job rows set up their jobs and leases. */
  bulkChunk: number;
  /** Longest the queued rows leave the jobs waiting once submitted (the sweeper's passes over them are what is watched). */
  queuedWaitMaxMs: number;
  /** Gives up on any one section after this long. */
  sectionTimeoutMs: number;
}

export const fullProfile: BenchProfile = {
  name: 'full',
  transportMessages: 50_000,
  transportPrefetch: 500,
  jobs: 20_000,
  warmupJobs: 1_000,
  latencySamples: 200,
  workers: 2,
  slots: 16,
  submitChunk: 1_000,
  // Issue 16's sizes: 100,000 leases across 1,000 workers, a 100,000-lease sweep, 1,000,000 queued jobs.
  heartbeatLeases: 100_000,
  heartbeatWorkers: 1_000,
  heartbeatIntervals: 3,
  sweepLeases: 100_000,
  queuedJobs: 1_000_000,
  // With fifo, a million work messages relayed into the embedded broker while the sweeper walks the
  // released backlog for redispatch did not finish within the section's time on a loaded machine:
  // a tenth of it (docs/performance.md, change 15).
  queuedJobsFifo: 100_000,
  bulkChunk: 10_000,
  queuedWaitMaxMs: 30_000,
  // The leases section sets up 100,000 leases five times, two of them by grants on PostgreSQL (each a transaction).
  sectionTimeoutMs: 1_800_000,
};

export const quickProfile: BenchProfile = {
  ...fullProfile,
  name: 'quick',
  transportMessages: 10_000,
  jobs: 3_000,
  warmupJobs: 300,
  latencySamples: 40,
  workers: 2,
  slots: 8,
  heartbeatLeases: 10_000,
  heartbeatWorkers: 100,
  heartbeatIntervals: 3,
  sweepLeases: 10_000,
  queuedJobs: 20_000,
  queuedJobsFifo: 20_000,
  bulkChunk: 1_000,
  queuedWaitMaxMs: 15_000,
  sectionTimeoutMs: 300_000,
};

export interface BenchEnvironment {
  amqpUrl: string;
  /** The PostgreSQL the sweep is measured on as well (a schema of its own, dropped after). */
  postgresUrl: string;
  redisHost: string;
  redisPort: number;
  /**
   * How the planrun rows' orchestrator dispatches (`PLANRUN_BENCH_DISPATCH`, default fair as
   * `planrun up`): fifo publishes each job's work at submit, to measure what fair dispatch costs.
   */
  dispatch: DispatchMode;
}

export const defaultEnvironment: BenchEnvironment = {
  amqpUrl: process.env.PLANRUN_BENCH_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672',
  postgresUrl: process.env.PLANRUN_BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
  redisHost: process.env.PLANRUN_BENCH_REDIS_HOST ?? '127.0.0.1',
  redisPort: Number(process.env.PLANRUN_BENCH_REDIS_PORT ?? 6379),
  dispatch: benchDispatch(process.env.PLANRUN_BENCH_DISPATCH),
};

function benchDispatch(value: string | undefined): DispatchMode {
  if (value === undefined || value === '' || value === 'fair') return 'fair';
  if (value === 'fifo') return 'fifo';
  throw new Error(`PLANRUN_BENCH_DISPATCH is fair or fifo, not "${value}"`);
}

/** The sections of one run, in the order they run and appear in the table. */
export const sectionNames = [
  'transport',
  'transport-embedded',
  'bullmq-memory',
  'bullmq-fsync',
  'bullmq-sandboxed',
  'bullmq-sandboxed-fsync',
  'planrun-embedded',
  'planrun-rabbitmq',
  'planrun-embedded-postgres',
  'planrun-postgres-1',
  'planrun-postgres-2',
  'planrun-postgres-3',
  'leases',
  'queued',
  'queued-fifo',
  'floors',
] as const;
export type SectionName = (typeof sectionNames)[number];

export interface SectionRequest {
  section: SectionName;
  profile: BenchProfile;
  env: BenchEnvironment;
  /** Set to make every process of the section write a V8 CPU profile into this folder. */
  cpuProfileDir?: string;
}
