/**
 * The history of a chaos run: every actor (the runner, the orchestrator, each worker, each
 * job process) appends JSON lines to a file of its own in one folder, each line stamped
 * with the time (all actors share one machine's clock), its source and its pid. Lines are
 * written with one synchronous append each, so a process killed with SIGKILL loses
 * nothing it already reported. At the end the files are merged, ordered by time, and
 * handed to the checker.
 */
import { appendFileSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AttemptRecord, Job, ResultMessage } from '../../src/ledger/ledger.js';
import type { WorkerEvent } from '../../src/worker/worker-events.js';
import type { ChaosInput } from './job-input.js';
import type { FaultKind, PlannedFault, Transport } from './plan.js';
import type { StoreConfig } from './store.js';

/** Environment variables that make planrun's processes record their part of the history. */
export const historyDirEnv = 'PLANRUN_CHAOS_HISTORY';
export const actorEnv = 'PLANRUN_CHAOS_ACTOR';
/** The same folder for job code, which is never handed a PLANRUN_* variable (docs/security.md). */
export const jobHistoryDirEnv = 'CHAOS_JOB_HISTORY';

interface Stamp {
  /** ms since the epoch, from the recording process's clock. */
  t: number;
  /** runner, orchestrator, w1..., job */
  src: string;
  pid: number;
}

/** The knobs the checker needs to judge timings (the liveness bound, backoffs, sweeps). */
export interface RunConfig {
  seed: string;
  /** Which broker the run drove (older histories: RabbitMQ). */
  broker?: 'rabbitmq' | 'embedded';
  prefix: string;
  jobs: number;
  durationMs: number;
  workers: number;
  slots: number;
  leaseTtlMs: number;
  /** The orchestrator's `--grant-window` (null: off; older runs: the ledger's default, 15 s). */
  grantWindowMs?: number | null;
  heartbeatMs: number;
  sweepMs: number;
  backoffMs: number;
  backoffMaxMs: number;
  redispatchMs: number;
  controlTimeoutMs: number;
  abortGraceMs: number;
  consumerTimeoutMs: number;
  /** Time allowed for every client to be back on the broker after a heal (reconnect backoff cap and connect timeout). */
  reconnectAllowanceMs: number;
  outputDir: string;
  /** The object store outputs went to (`--store s3`); without it, the workers' folder store in outputDir. */
  store?: StoreConfig;
  httpAvailable: boolean;
  /** Running limits the run set per tenant (`planrun tenants set --max-running`; older runs: none). */
  tenantLimits?: Record<string, number>;
  faultFingerprint: string;
  jobFingerprint: string;
}

/** What the adversary's forged settles claim as a job's result: the checker looks for it in the ledger. */
export const forgedResultMark = 'forged-by-the-adversary';

export type RunnerEvent =
  | { kind: 'run_config'; config: RunConfig }
  | { kind: 'plan_fault'; fault: PlannedFault }
  | {
      kind: 'submit';
      tenant: string;
      key: string;
      /** Which planned job (its index) this submission is for. */
      job: number;
      transport: Transport;
      /** The broker confirmed the publish, or the API answered 2xx with the job. */
      acked: boolean;
      /** 0 for the first planned submission, 1 for the repeat; `retry` counts resends of an unacked one. */
      copy: number;
      retry: number;
      input: ChaosInput;
      maxAttempts: number;
      jobId?: string;
      error?: string;
    }
  | { kind: 'fault_start'; fault: number; fault_kind: FaultKind; target: string; detail?: string }
  | { kind: 'fault_end'; fault: number; fault_kind: FaultKind; target: string; ok: boolean; detail?: string }
  | { kind: 'proc_start'; role: 'orchestrator' | 'worker'; name: string; child: number }
  | { kind: 'proc_ready'; role: 'orchestrator' | 'worker'; name: string; child: number }
  | {
      kind: 'proc_exit';
      role: 'orchestrator' | 'worker';
      name: string;
      child: number;
      code: number | null;
      signal: string | null;
      /** nemesis: killed on purpose; shutdown: stopped at the end; start_failed: exited before it was ready; else unexpected. */
      cause: 'nemesis' | 'shutdown' | 'start_failed' | 'unexpected';
      ready: boolean;
      tail?: string;
    }
  | { kind: 'result'; messageId: string | null; routingKey: string; redelivered: boolean; body: ResultMessage }
  | { kind: 'submissions_done'; planned: number; acked: number; unacked: number }
  | { kind: 'drain'; complete: boolean; waitedMs: number; missing: Array<{ tenant: string; key: string }> }
  | { kind: 'queues_final'; queues: Array<{ name: string; messages: number; unacked: number }>; error?: string }
  | { kind: 'outbox_final'; unsent: number }
  | { kind: 'ledger_job'; job: Job; attempts: AttemptRecord[] }
  | { kind: 'stored_output'; jobId: string; name: string; path: string; exists: boolean; bytes?: number; sha256?: string }
  /** Every object left under the object store's prefix at the end, listed once the orchestrator's cleaner had run until `cleanedUntil`. */
  | { kind: 'store_final'; cleanedUntil: number; objects: Array<{ location: string; bytes: number }> }
  | { kind: 'run_end'; ok: boolean; error?: string }
  /** A control request the adversary forged, and the orchestrator's answer (see adversary.ts). */
  | { kind: 'forgery'; op: string; withKey: boolean; impersonates: boolean; req: Record<string, unknown>; ans: Record<string, unknown> };

export type OrchestratorEvent =
  | {
      kind: 'control';
      op: string;
      /** The request, minus what is bulky (heartbeat capability lists, settle outputs kept). */
      req: Record<string, unknown>;
      ans: Record<string, unknown>;
      /**
       * When the request reached the orchestrator's handler (ms since the epoch); the event's
       * `t` is when it answered, which a stalled orchestrator or a slow ledger may delay.
       */
      receivedAt?: number;
    }
  | {
      kind: 'publish';
      /** A work queue (sendToQueue) or the results exchange (publish). */
      to: string;
      routingKey?: string;
      messageId: string | null;
      tenantHeader: string | null;
      body: unknown;
      ok: boolean;
      error?: string;
    };

export type SharedEvent =
  | { kind: 'delivery'; queue: string; messageId: string | null; redelivered: boolean }
  | { kind: 'broker_event'; type: string; queue?: string; reason?: string }
  | { kind: 'actor_start'; role: string; worker?: string };

export type WorkerHistoryEvent = { kind: 'worker_event'; worker: string; ev: WorkerEvent };

export type JobProcessEvent =
  | { kind: 'run_start'; jobId: string; attempt: number; tenant: string; behaviour: string; ppid: number }
  | { kind: 'run_output'; jobId: string; attempt: number; bytes: number; sha256: string }
  | { kind: 'run_raise'; jobId: string; attempt: number; class: string }
  | { kind: 'run_hang'; jobId: string; attempt: number; ms: number };

export type HistoryEvent = Stamp & (RunnerEvent | OrchestratorEvent | SharedEvent | WorkerHistoryEvent | JobProcessEvent);
export type HistoryEventOf<K extends HistoryEvent['kind']> = Extract<HistoryEvent, { kind: K }>;

type Unstamped = RunnerEvent | OrchestratorEvent | SharedEvent | WorkerHistoryEvent | JobProcessEvent;

/** Appends this process's events to `<dir>/<src>-<pid>.jsonl`. */
export class HistoryWriter {
  private readonly file: string;

  constructor(
    dir: string,
    readonly src: string,
  ) {
    mkdirSync(dir, { recursive: true });
    this.file = join(dir, `${src}-${process.pid}.jsonl`);
  }

  record(event: Unstamped): void {
    const line = JSON.stringify({ t: Date.now(), src: this.src, pid: process.pid, ...event });
    try {
      appendFileSync(this.file, `${line}\n`);
    } catch {
      // A full or vanished history folder must not take the actor down; the checker
      // reports what is missing.
    }
  }
}

/** Every event of every file in `dir`, ordered by time (ties keep each file's order). */
export function readHistory(dir: string): HistoryEvent[] {
  const events: Array<{ event: HistoryEvent; order: number }> = [];
  let order = 0;
  for (const name of readdirSync(dir)
    .filter((n) => n.endsWith('.jsonl'))
    .sort()) {
    for (const line of readFileSync(join(dir, name), 'utf8').split('\n')) {
      if (line.trim() === '') continue;
      try {
        events.push({ event: JSON.parse(line) as HistoryEvent, order: order++ });
      } catch {
        // A line torn by a kill mid-write: nothing after it in that file is lost.
      }
    }
  }
  events.sort((a, b) => a.event.t - b.event.t || a.order - b.order);
  return events.map((e) => e.event);
}

export function writeMergedHistory(file: string, events: readonly HistoryEvent[]): void {
  writeFileSync(file, events.map((event) => JSON.stringify(event)).join('\n') + '\n');
}
