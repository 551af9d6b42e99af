import type { LatencySummary } from './measure.js';

/** What one throughput section measured: sections (1) to (4). */
export interface ThroughputResult {
  /** Jobs (or, for the transport, messages) that went all the way through. */
  count: number;
  seconds: number;
  perSecond: number;
  /** Submit (or publish) to start (or delivery), one at a time at low load. */
  latency: LatencySummary;
  /** Peak RSS of the planrun orchestrator process (which also runs the benchmark's submitter). */
  orchestratorRssMiB?: number;
  /** Peak RSS of the broker or Redis during the section. */
  serverRssMiB?: number;
  /** What `serverRssMiB` is of. */
  server?: string;
  /** Highest peak RSS among the worker (consumer) processes. */
  workerRssMiB?: number;
  /** Highest peak RSS among planrun's job processes (one per slot). */
  jobProcessRssMiB?: number;
  /** planrun: orchestrator-process CPU per job in the throughput phase (less noisy than jobs/s on a busy machine). */
  orchestratorCpuMsPerJob?: number;
  /** CPU of the broker or Redis process per job (message) in the throughput phase (the shared servers may serve others too). */
  serverCpuMsPerJob?: number;
  /** CPU of the worker processes (and planrun's job processes) per job in the throughput phase. */
  workerCpuMsPerJob?: number;
  /** planrun: the part of workerCpuMsPerJob spent in the job processes. */
  jobProcessCpuMsPerJob?: number;
  /** planrun: ledger transactions (commits, each an fsync) per job in the throughput phase. */
  transactionsPerJob?: number;
  /** planrun on the embedded broker: messages the broker routed per job (work, control requests and replies, result). */
  brokerMessagesPerJob?: number;
  /** 1-minute load average when the section started and ended. */
  load: [number, number];
  notes: string[];
}

export interface HeartbeatResult {
  leases: number;
  workers: number;
  intervals: number;
  /** Ledger transactions (commits) per heartbeat interval, on average, the heartbeats arriving together. */
  transactionsPerInterval: number;
  /** The same with the heartbeats spread over the interval (each answered before the next arrives). */
  transactionsPerIntervalSpread: number;
  /** Orchestrator CPU (decode, validate, ledger, encode) per interval, on average. */
  cpuMsPerInterval: number;
  /** Wall time to answer every heartbeat of one interval, on average. */
  wallMsPerInterval: number;
}

export interface SweepResult {
  leases: number;
  /** One ledger sweep pass with a limit that covers every expired lease. */
  onePassMs: number;
  /** The same pass on the PostgreSQL ledger. */
  postgresOnePassMs: number;
  /** The orchestrator's sweeper at its default per-pass limit: passes needed, and their summed time. */
  sweeperPasses: number;
  sweeperTotalMs: number;
  sweeperLimit: number;
  /** The same sweeper on the PostgreSQL ledger. */
  postgresSweeperPasses: number;
  postgresSweeperTotalMs: number;
}

export interface QueuedResult {
  /** How the ledger released work: fair (the default; a job waits in the ledger) or fifo (its work message is sent at submit). */
  dispatch: 'fair' | 'fifo';
  jobs: number;
  /** Jobs per submitMany call. */
  submitChunk: number;
  /** Peak RSS of the orchestrator process (embedded broker included) while they were submitted and relayed. */
  peakRssMiB: number;
  /** RSS once every work message was relayed and the process was idle. */
  settledRssMiB: number;
  submitSeconds: number;
  /** Then how long the jobs waited, with no worker, while the sweeper ran; peakRssMiB covers it. */
  waitedSeconds: number;
  /** The redispatch period during that wait. */
  redispatchAfterSeconds: number;
  /** The orchestrator process's CPU during that wait, per second waited: what the idle backlog costs. */
  waitCpuMsPerSecond: number;
  /** The ledger's files on disk (database and WAL) at the end. */
  ledgerMiB: number;
  /** Work messages the embedded broker had taken by the end: one per job unless the sweeper sent copies. */
  messagesHeld: number;
}

/** The leases section: heartbeats and sweep, in one process. */
export interface LeasesResult {
  heartbeat: HeartbeatResult;
  sweep: SweepResult;
  load: [number, number];
}

export interface QueuedSectionResult {
  queued: QueuedResult;
  load: [number, number];
}

/** Section F: what the parts of one job cost at least, each measured apart (floors.ts). */
export interface FloorsResult {
  /** CPU of the SQLite ledger's whole path of one job (submit to result marked sent), synchronous=FULL. */
  ledgerCpuMsPerJob: number;
  /** CPU of one no-op run in the child-process pool, pool and job process together. */
  childRunCpuMsPerJob: number;
  /** CPU of making and removing one scratch folder. */
  scratchCpuMsPerJob: number;
  /** Jobs at once in the ledger path (the throughput sections' workers × slots). */
  parallel: number;
  /** Cores of the machine, for the ceiling the floors put on jobs/s. */
  cores: number;
  load: [number, number];
}

export type SectionResult = ThroughputResult | LeasesResult | QueuedSectionResult | FloorsResult;

/** Everything one run measured, by section (a section that failed holds its error). */
export interface BenchRun {
  profile: string;
  startedAt: string;
  command: string;
  /** The machine's 1, 5 and 15-minute load averages when the run started. */
  loadAtStart: number[];
  /** What the person who ran it saw and wants the page to say (`--note`), e.g. other work on the machine. */
  note?: string;
  sections: Partial<Record<string, SectionResult | { error: string }>>;
}

/** One run of tools/bench/fairness.ts (the JSON line it prints). */
export interface FairnessRun {
  dispatch: 'fair' | 'fifo';
  aJobs: number;
  bJobs: number;
  slots: number;
  /** From B's submitMany call to each of B's jobs starting in its job process. */
  bSubmitToStartMs: { p50: number; p99: number };
  /** The whole run's jobs (A's and B's) over its time. */
  jobsPerSecond: number;
  seconds?: number;
  load?: [number, number];
}
