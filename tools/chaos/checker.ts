/**
 * The checker: reads a chaos run's history (and nothing else) and says, for each
 * invariant of planrun's promises, whether it held, with the offending job's events when
 * it did not. It is a pure function of the history, so it can be run again on a saved
 * history, and tested on hand-written ones.
 *
 * The ledger's final state (the `ledger_job` events) is the record; the other actors'
 * events are what each of them saw or did, and an actor killed at the wrong moment may
 * have missed writing its last event. So every invariant is phrased to hold on any
 * prefix of an actor's events: "at most one", "never after", "if recorded, equal".
 */
import type { FailoverReport } from './failover.js';
import type { AttemptRecord, Job, ResultMessage } from '../../src/ledger/ledger.js';
import { fatalExitCode } from '../../src/worker/exit-codes.js';
import { plainLocation, type OutputFile } from '../../src/wire/outputs.js';
import { forgedResultMark, type HistoryEvent, type HistoryEventOf, type RunConfig } from './history.js';
import type { ChaosInput } from './job-input.js';

export type Status = 'held' | 'violated';

export interface Violation {
  jobId?: string;
  message: string;
  /** The events that show the problem itself (an accepted stale settle, a second result...). */
  focus?: HistoryEvent[];
  /** The job's history (or whatever shows the problem), oldest first. */
  events: HistoryEvent[];
}

export interface InvariantResult {
  id: string;
  promise: string;
  title: string;
  status: Status;
  /** How many things were checked (jobs, attempts, messages...). */
  checked: number;
  violations: Violation[];
  note?: string;
}

export interface FaultSummary {
  id: number;
  kind: string;
  target: string;
  atMs: number;
  durationMs: number | null;
  ok: boolean | null;
  detail?: string;
}

export interface CheckReport {
  ok: boolean;
  config: RunConfig | undefined;
  faults: FaultSummary[];
  jobFaults: Record<string, number>;
  jobs: {
    submitted: number;
    acked: number;
    submissions: { sent: number; acked: number; byTransport: Record<string, number>; repeats: number };
    inLedger: number;
    byOutcome: Record<string, number>;
    byBehaviour: Record<string, Record<string, number>>;
  };
  timing: { startedAt: number; lastHealAt: number; lastTerminalAt: number; livenessBoundMs: number; maxLagAfterHealMs: number };
  notices: string[];
  /** Grants taken back at the same attempt (edge abandon), as the control history shows them. */
  abandons: AbandonSummary;
  invariants: InvariantResult[];
  /** `--profile ha`: the failover figures (failover.ts), measured by the run. */
  failover?: FailoverReport;
}

export interface AbandonSummary {
  /** Grants never taken up and granted again at the same attempt: each one an abandon, no attempt spent. */
  grants: number;
  /** Of those, the grants a worker had started to run (it heard of the abandon later, and stopped the job). */
  ran: number;
  /** Requests naming an abandoned grant's token after it was granted: every one refused. */
  refused: number;
}

/** Tolerances, in ms. */
const tolerance = {
  /**
   * Between the ledger's clock reading in an operation and the orchestrator recording its
   * answer: with group commit, the answer waits for the COMMIT (an fsync) of the whole
   * batch, in which a later operation (a settle) may already have ended the attempt.
   */
  answer: 1000,
  /** A fence (or local-deadline check) passed, then the output was copied: how long that copy may take. */
  outputCopy: 1000,
  /** Extra time the sweeper may need beyond TTL + sweep interval on a loaded machine (a pass, its commit). */
  sweep: 2000,
  /** Clock granularity between processes on one machine. */
  clock: 50,
};

interface KeyInfo {
  tenant: string;
  key: string;
  job: number;
  input: ChaosInput;
  maxAttempts: number;
  submits: HistoryEventOf<'submit'>[];
  acked: boolean;
  firstAckAt: number | undefined;
}

interface LedgerEntry {
  job: Job;
  attempts: AttemptRecord[];
  event: HistoryEventOf<'ledger_job'>;
}

const keyOf = (tenant: string, key: string) => `${tenant}\u0000${key}`;
const terminalOutcomes = new Set(['finished', 'failed', 'cancelled']);
const settleOutcome: Record<string, string> = {
  finish: 'finished',
  fail_permanent: 'failed',
  exhaust: 'failed',
  retry: 'retried',
  // A worker's release (Fatal, or stopping) ends its attempt with the same CAS as a settle.
  release: 'released',
  cancel_running: 'cancelled',
};
const terminalTransitions = new Set(['finish', 'fail_permanent', 'exhaust', 'cancel_running']);

export function check(history: readonly HistoryEvent[]): CheckReport {
  const ctx = new Context(history);
  const invariants = [
    noLoss(ctx),
    oneSettle(ctx),
    oneLeasePerAttempt(ctx),
    oneResult(ctx),
    oneEffectAcrossOrchestrators(ctx),
    idempotency(ctx),
    noStaleAccepted(ctx),
    staleOutput(ctx),
    outputMatches(ctx),
    storeCleaned(ctx),
    attemptsBounded(ctx),
    permanentOnce(ctx),
    transientRetried(ctx),
    scratchReserve(ctx),
    fatalStops(ctx),
    ackEarly(ctx),
    sweepPrompt(ctx),
    liveness(ctx),
    admission(ctx),
    limitsHeld(ctx),
    tenancy(ctx),
    quiescent(ctx),
    processHealth(ctx),
    forgeriesRefused(ctx),
  ];
  return {
    ok: invariants.every((i) => i.status === 'held'),
    config: ctx.config,
    faults: ctx.faultSummaries(),
    jobFaults: ctx.jobFaultCounts(),
    jobs: ctx.jobSummary(),
    timing: {
      startedAt: ctx.startedAt,
      lastHealAt: ctx.lastHealAt,
      lastTerminalAt: ctx.lastTerminalAt,
      livenessBoundMs: ctx.livenessBoundMs(),
      maxLagAfterHealMs: ctx.lastTerminalAt > 0 ? Math.max(0, ctx.lastTerminalAt - ctx.lastHealAt) : 0,
    },
    notices: ctx.notices(),
    abandons: abandonSummary(ctx),
    invariants,
  };
}

class Context {
  readonly config: RunConfig | undefined;
  readonly keys = new Map<string, KeyInfo>();
  readonly ledger = new Map<string, LedgerEntry>();
  readonly ledgerByKey = new Map<string, LedgerEntry[]>();
  readonly byJob = new Map<string, HistoryEvent[]>();
  readonly results = new Map<string, HistoryEventOf<'result'>[]>();
  readonly controls: HistoryEventOf<'control'>[] = [];
  readonly procEvents: Array<HistoryEventOf<'proc_start'> | HistoryEventOf<'proc_ready'> | HistoryEventOf<'proc_exit'>> = [];
  readonly hasLedger: boolean;
  readonly startedAt: number;
  readonly lastHealAt: number;
  readonly lastTerminalAt: number;

  constructor(readonly history: readonly HistoryEvent[]) {
    this.config = history.find((e): e is HistoryEventOf<'run_config'> => e.kind === 'run_config')?.config;
    this.startedAt = history.find((e) => e.kind === 'run_config')?.t ?? history[0]?.t ?? 0;
    let lastHeal = this.startedAt;
    for (const event of history) {
      switch (event.kind) {
        case 'submit': {
          const k = keyOf(event.tenant, event.key);
          let info = this.keys.get(k);
          if (!info) {
            info = {
              tenant: event.tenant,
              key: event.key,
              job: event.job,
              input: event.input,
              maxAttempts: event.maxAttempts,
              submits: [],
              acked: false,
              firstAckAt: undefined,
            };
            this.keys.set(k, info);
          }
          info.submits.push(event);
          if (event.acked && !info.acked) {
            info.acked = true;
            info.firstAckAt = event.t;
          }
          break;
        }
        case 'ledger_job': {
          const entry = { job: event.job, attempts: event.attempts, event };
          this.ledger.set(event.job.id, entry);
          if (event.job.idempotencyKey !== null) {
            const k = keyOf(event.job.tenant, event.job.idempotencyKey);
            append(this.ledgerByKey, k, entry);
          }
          break;
        }
        case 'result': {
          const id = typeof event.body?.id === 'string' ? event.body.id : `(no id: ${event.messageId})`;
          append(this.results, id, event);
          break;
        }
        case 'control':
          this.controls.push(event);
          break;
        case 'proc_start':
        case 'proc_ready':
        case 'proc_exit':
          this.procEvents.push(event);
          break;
        case 'fault_end':
          lastHeal = Math.max(lastHeal, event.t);
          break;
        default:
          break;
      }
      for (const jobId of jobIdsOf(event)) append(this.byJob, jobId, event);
    }
    // Submissions belong to the job their key names.
    for (const [k, entries] of this.ledgerByKey) {
      const info = this.keys.get(k);
      if (!info) continue;
      for (const entry of entries) {
        const events = [...info.submits, ...(this.byJob.get(entry.job.id) ?? [])].sort((a, b) => a.t - b.t);
        this.byJob.set(entry.job.id, events);
      }
    }
    this.hasLedger = history.some((e) => e.kind === 'ledger_job') || history.some((e) => e.kind === 'outbox_final');
    this.lastHealAt = lastHeal;
    let lastTerminal = 0;
    for (const { job } of this.ledger.values()) if (job.endedAt !== null) lastTerminal = Math.max(lastTerminal, job.endedAt);
    this.lastTerminalAt = lastTerminal;
  }

  eventsOf(jobId: string | undefined): HistoryEvent[] {
    return jobId === undefined ? [] : (this.byJob.get(jobId) ?? []);
  }

  /** The job's final ledger record, as a one-event list (empty when the ledger lacks it). */
  ledgerEvent(jobId: string): HistoryEvent[] {
    const entry = this.ledger.get(jobId);
    return entry ? [entry.event] : [];
  }

  keyInfoOf(job: Job): KeyInfo | undefined {
    return job.idempotencyKey === null ? undefined : this.keys.get(keyOf(job.tenant, job.idempotencyKey));
  }

  workerEvents(jobId: string): Array<HistoryEventOf<'worker_event'>> {
    return this.eventsOf(jobId).filter((e): e is HistoryEventOf<'worker_event'> => e.kind === 'worker_event');
  }

  /** Whether the orchestrator was down (killed, restarting) at any moment of [from, to]. */
  orchestratorDownDuring(from: number, to: number): boolean {
    let up = true;
    let upSince = -Infinity;
    for (const event of this.procEvents) {
      if (event.role !== 'orchestrator') continue;
      if (event.t > to) break;
      if (event.kind === 'proc_exit') {
        if (event.t >= from) return true;
        up = false;
      } else if (event.kind === 'proc_ready') {
        up = true;
        upSince = event.t;
      }
    }
    return !up || upSince > from;
  }

  /** When each fault was in force, by target (w1, orchestrator, broker). */
  faultWindows(): Array<{ target: string; kind: string; start: number; end: number }> {
    const open = new Map<number, { target: string; kind: string; start: number }>();
    const windows: Array<{ target: string; kind: string; start: number; end: number }> = [];
    for (const e of this.history) {
      if (e.kind === 'fault_start') open.set(e.fault, { target: e.target, kind: e.fault_kind, start: e.t });
      if (e.kind === 'fault_end') {
        const started = open.get(e.fault);
        if (started) windows.push({ ...started, end: e.t });
        open.delete(e.fault);
      }
    }
    for (const started of open.values()) windows.push({ ...started, end: Infinity });
    return windows;
  }

  livenessBoundMs(): number {
    const c = this.config;
    if (!c) return 0;
    const attempts = Math.max(1, ...[...this.keys.values()].map((k) => k.maxAttempts));
    let perAttempt = 0;
    for (let k = 1; k <= attempts; k++) perAttempt += backoff(c, k);
    const maxRun = Math.max(0, ...[...this.keys.values()].map((k) => runCost(k.input)));
    // Work still to do when the last fault healed, spread over every slot of the fleet.
    let backlog = 0;
    for (const entry of this.ledger.values()) {
      if (entry.job.endedAt !== null && entry.job.endedAt <= this.lastHealAt) continue;
      const info = this.keyInfoOf(entry.job);
      if (info)
        backlog +=
          runCost(info.input) * Math.max(1, info.maxAttempts - entry.attempts.filter((a) => a.endedAt !== null && a.endedAt <= this.lastHealAt).length);
    }
    const backlogMs = (1.5 * backlog) / Math.max(1, c.workers * c.slots);
    return Math.round(
      c.reconnectAllowanceMs +
        c.leaseTtlMs +
        c.sweepMs +
        c.redispatchMs +
        perAttempt +
        attempts * (maxRun + c.abortGraceMs + 2 * c.controlTimeoutMs + c.heartbeatMs) +
        backlogMs,
    );
  }

  faultSummaries(): FaultSummary[] {
    const out = new Map<number, FaultSummary>();
    for (const event of this.history) {
      if (event.kind === 'fault_start') {
        out.set(event.fault, {
          id: event.fault,
          kind: event.fault_kind,
          target: event.target,
          atMs: event.t - this.startedAt,
          durationMs: null,
          ok: null,
          ...(event.detail === undefined ? {} : { detail: event.detail }),
        });
      } else if (event.kind === 'fault_end') {
        const summary = out.get(event.fault);
        if (summary) {
          summary.durationMs = event.t - this.startedAt - summary.atMs;
          summary.ok = event.ok;
          if (event.detail !== undefined) summary.detail = [summary.detail, event.detail].filter(Boolean).join('; ');
        }
      }
    }
    return [...out.values()].sort((a, b) => a.id - b.id);
  }

  jobFaultCounts(): Record<string, number> {
    const counts: Record<string, number> = {};
    const bump = (name: string) => (counts[name] = (counts[name] ?? 0) + 1);
    for (const event of this.history) {
      if (event.kind === 'run_raise') bump(`job ${event.class}`);
      else if (event.kind === 'run_hang') bump('job hang');
      else if (event.kind === 'run_output' && event.bytes > 64 * 1024) bump('job over-reserve write');
    }
    return counts;
  }

  jobSummary(): CheckReport['jobs'] {
    const byOutcome: Record<string, number> = {};
    const byBehaviour: Record<string, Record<string, number>> = {};
    for (const { job } of this.ledger.values()) {
      const outcome = job.state === 'failed' ? `failed/${job.failureReason}` : job.state;
      byOutcome[outcome] = (byOutcome[outcome] ?? 0) + 1;
      const behaviour = this.keyInfoOf(job)?.input.behaviour ?? '(unknown)';
      const row = (byBehaviour[behaviour] ??= {});
      row[outcome] = (row[outcome] ?? 0) + 1;
    }
    const submits = this.history.filter((e): e is HistoryEventOf<'submit'> => e.kind === 'submit');
    const byTransport: Record<string, number> = {};
    for (const s of submits) if (s.acked) byTransport[s.transport] = (byTransport[s.transport] ?? 0) + 1;
    return {
      submitted: this.keys.size,
      acked: [...this.keys.values()].filter((k) => k.acked).length,
      submissions: {
        sent: submits.length,
        acked: submits.filter((s) => s.acked).length,
        byTransport,
        repeats: submits.filter((s) => s.acked && s.copy > 0).length,
      },
      inLedger: this.ledger.size,
      byOutcome,
      byBehaviour,
    };
  }

  notices(): string[] {
    const notes: string[] = [];
    // Grants nobody took up: the worker had given up on its request (timed out, message
    // given back) by the time the answer came. Not unsafe: the sweep takes them back at the
    // same attempt (abandon, counted in the report's abandons) once the grant window
    // passes, or, without one, the lease expires unrenewed and costs an attempt.
    let expired = 0;
    for (const k of attemptLeases(this).keys()) {
      const [jobId, attempt] = [k.split('@')[0]!, Number(k.split('@')[1])];
      const taken = this.workerEvents(jobId).some((e) => e.ev.type === 'lease_granted' && e.ev.attempt === attempt);
      if (!taken && this.ledger.get(jobId)?.attempts.find((a) => a.attempt === attempt)?.outcome === 'expired') expired++;
    }
    if (expired > 0)
      notes.push(`${expired} lease grant(s) reached no worker (the request had timed out on the worker's side) and expired; each cost an attempt`);
    const unacked = this.history.filter((e) => e.kind === 'submit' && !e.acked).length;
    if (unacked > 0) notes.push(`${unacked} submission tries were not acknowledged (broker or orchestrator down) and were sent again`);
    return notes;
  }
}

function append<K, V>(map: Map<K, V[]>, key: K, value: V): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}

function backoff(c: RunConfig, failedAttempt: number): number {
  return Math.min(c.backoffMaxMs, c.backoffMs * 2 ** Math.max(0, failedAttempt - 1));
}

/** The most time one attempt of this job can hold a slot. */
function runCost(input: ChaosInput): number {
  return (input.runMs ?? 0) + (input.hangMs ?? 0);
}

function jobIdsOf(event: HistoryEvent): string[] {
  switch (event.kind) {
    case 'control': {
      if (event.op === 'heartbeat') {
        const leases = Array.isArray(event.req.leases) ? (event.req.leases as Array<{ jobId: string }>) : [];
        return [...new Set(leases.map((l) => l.jobId))];
      }
      return typeof event.req.jobId === 'string' ? [event.req.jobId] : [];
    }
    case 'worker_event':
      return 'jobId' in event.ev ? [event.ev.jobId] : [];
    case 'run_start':
    case 'run_output':
    case 'run_raise':
    case 'run_hang':
    case 'stored_output':
      return [event.jobId];
    case 'result':
      return typeof event.body?.id === 'string' ? [event.body.id] : [];
    case 'publish': {
      const body = event.body as { jobId?: unknown; id?: unknown } | null;
      const id = body?.jobId ?? body?.id;
      return typeof id === 'string' ? [id] : [];
    }
    case 'ledger_job':
      return [event.job.id];
    case 'delivery': {
      const match = event.messageId ? /^(.+)@\d+$/.exec(event.messageId) : null;
      return match ? [match[1]!] : [];
    }
    default:
      return [];
  }
}

function result(id: string, promise: string, title: string, checked: number, violations: Violation[], note?: string): InvariantResult {
  return { id, promise, title, status: violations.length === 0 ? 'held' : 'violated', checked, violations, ...(note ? { note } : {}) };
}

function noLedger(id: string, promise: string, title: string): InvariantResult {
  return result(id, promise, title, 0, [{ message: 'the history holds no final ledger state (the run did not get that far)', events: [] }]);
}

// ---------------------------------------------------------------- G1

function noLoss(ctx: Context): InvariantResult {
  const title = 'no acknowledged submission lost: each is one job in the ledger, terminal after the drain';
  if (!ctx.hasLedger) return noLedger('no-loss', 'G1', title);
  const violations: Violation[] = [];
  let checked = 0;
  for (const [k, info] of ctx.keys) {
    if (!info.acked) continue;
    checked++;
    const entries = ctx.ledgerByKey.get(k) ?? [];
    if (entries.length === 0) {
      violations.push({ message: `acknowledged submission ${info.tenant}/${info.key} has no job in the ledger`, events: info.submits });
      continue;
    }
    for (const { job } of entries) {
      if (job.state !== 'finished' && job.state !== 'failed') {
        violations.push({
          jobId: job.id,
          message: `job ${job.id} (${info.tenant}/${info.key}) is still ${job.state}@${job.attempt} after the drain`,
          events: ctx.eventsOf(job.id),
        });
      }
    }
  }
  // Jobs from unacknowledged tries exist too (the confirm was lost, not the message): they must end as well.
  for (const { job } of ctx.ledger.values()) {
    const info = ctx.keyInfoOf(job);
    if (info?.acked) continue;
    checked++;
    if (job.state !== 'finished' && job.state !== 'failed') {
      violations.push({
        jobId: job.id,
        message: `job ${job.id} (from an unacknowledged submission) is still ${job.state}@${job.attempt}`,
        events: ctx.eventsOf(job.id),
      });
    }
  }
  return result('no-loss', 'G1', title, checked, violations);
}

// ---------------------------------------------------------------- G2

function oneSettle(ctx: Context): InvariantResult {
  const title = 'one settled attempt per job (ledger and accepted settles)';
  if (!ctx.hasLedger) return noLedger('one-settle', 'G2', title);
  const violations: Violation[] = [];
  const acceptedTerminal = new Map<string, HistoryEventOf<'control'>[]>();
  const acceptedPerAttempt = new Map<string, number>();
  for (const c of ctx.controls) {
    if ((c.op !== 'settle' && c.op !== 'release') || c.ans.accepted !== true) continue;
    const jobId = c.req.jobId as string;
    const perAttempt = `${jobId}@${String(c.req.attempt)}`;
    acceptedPerAttempt.set(perAttempt, (acceptedPerAttempt.get(perAttempt) ?? 0) + 1);
    if (terminalTransitions.has(String(c.ans.transition))) append(acceptedTerminal, jobId, c);
  }
  for (const [jobId, settles] of acceptedTerminal) {
    if (settles.length > 1) {
      violations.push({
        jobId,
        message: `job ${jobId}: ${settles.length} settles ending it were accepted (attempts ${settles.map((s) => s.req.attempt).join(', ')})`,
        focus: [...settles, ...ctx.ledgerEvent(jobId)],
        events: ctx.eventsOf(jobId),
      });
    }
  }
  for (const [attempt, n] of acceptedPerAttempt) {
    if (n > 1) {
      const jobId = attempt.split('@')[0]!;
      violations.push({ jobId, message: `attempt ${attempt}: ${n} settles accepted`, events: ctx.eventsOf(jobId) });
    }
  }
  for (const { job, attempts } of ctx.ledger.values()) {
    const ending = attempts.filter((a) => a.outcome !== null && terminalOutcomes.has(a.outcome));
    const problem =
      ending.length > 1
        ? `${ending.length} attempts ended the job (${ending.map((a) => `${a.attempt}:${a.outcome}`).join(', ')})`
        : ending.length === 1 && ending[0]!.attempt !== job.attempt
          ? `attempt ${ending[0]!.attempt} ended the job but the job is at attempt ${job.attempt}`
          : ending.length === 1 && job.state !== 'finished' && job.state !== 'failed'
            ? `attempt ${ending[0]!.attempt} ended (${ending[0]!.outcome}) but the job is ${job.state}`
            : job.state === 'finished' && ending.length === 0
              ? 'finished with no attempt recorded as finished'
              : undefined;
    if (problem) violations.push({ jobId: job.id, message: `job ${job.id}: ${problem}`, events: ctx.eventsOf(job.id) });
  }
  return result('one-settle', 'G2', title, ctx.ledger.size, violations);
}

/** One lease (token) granted for an attempt, as the control history shows it. */
interface AttemptLease {
  worker: string;
  token: string;
  grants: HistoryEventOf<'control'>[];
  /** The first accepted control request naming its token (renewal, progress, live fence, settle, release), if any. */
  takenUpBy: HistoryEventOf<'control'> | undefined;
}

/**
 * The leases granted per attempt (`job@n`), in the order first granted. A holder asking
 * again for its own live lease gets it back (same token, renewed): that is one lease. An
 * attempt has a second lease only after its first was abandoned (edge abandon,
 * docs/state-machine.md): never taken up, it went back to queued at the same attempt.
 */
function attemptLeases(ctx: Context): Map<string, AttemptLease[]> {
  const byAttempt = new Map<string, AttemptLease[]>();
  const byToken = new Map<string, AttemptLease>();
  const takenUp = (token: unknown, c: HistoryEventOf<'control'>) => {
    const lease = typeof token === 'string' ? byToken.get(token) : undefined;
    if (lease && !lease.takenUpBy) lease.takenUpBy = c;
  };
  for (const c of ctx.controls) {
    if (c.op === 'lease' && c.ans.granted === true) {
      const token = String(c.ans.token);
      let lease = byToken.get(token);
      if (!lease) {
        lease = { worker: String(c.req.worker), token, grants: [], takenUpBy: undefined };
        byToken.set(token, lease);
        append(byAttempt, `${String(c.req.jobId)}@${String(c.req.attempt)}`, lease);
      }
      lease.grants.push(c);
    } else if (c.op === 'heartbeat' && Array.isArray(c.ans.renewed) && Array.isArray(c.req.leases)) {
      const renewed = new Set((c.ans.renewed as Array<{ jobId: string; attempt: number }>).map((r) => `${r.jobId}@${r.attempt}`));
      for (const l of c.req.leases as Array<{ jobId: string; attempt: number; token: string }>) if (renewed.has(`${l.jobId}@${l.attempt}`)) takenUp(l.token, c);
    } else if (c.ans.accepted === true || c.ans.live === true) {
      takenUp(c.req.token, c);
    }
  }
  return byAttempt;
}

/** The leases of an attempt that were abandoned: all but the last one granted. */
function abandonedLeases(leases: Map<string, AttemptLease[]>): Set<string> {
  const tokens = new Set<string>();
  for (const list of leases.values()) for (const lease of list.slice(0, -1)) tokens.add(lease.token);
  return tokens;
}

/** One refusal of a request that named an abandoned grant's token, with the reason given. */
interface AbandonedTokenRefusal {
  jobId: string;
  token: string;
  reason: string;
  control: HistoryEventOf<'control'>;
}

/** Every refusal of a request naming one of `tokens`: a heartbeat's lost lease, or a refused progress, log, fence, settle... */
function refusalsOf(ctx: Context, tokens: Set<string>): AbandonedTokenRefusal[] {
  const refusals: AbandonedTokenRefusal[] = [];
  for (const c of ctx.controls) {
    if (c.op === 'heartbeat' && Array.isArray(c.req.leases) && Array.isArray(c.ans.lost)) {
      const named = new Map((c.req.leases as Array<{ jobId: string; attempt: number; token: string }>).map((l) => [`${l.jobId}@${l.attempt}`, l.token]));
      for (const lost of c.ans.lost as Array<{ jobId: string; attempt: number; reason: string }>) {
        const token = named.get(`${lost.jobId}@${lost.attempt}`);
        if (token !== undefined && tokens.has(token)) refusals.push({ jobId: lost.jobId, token, reason: lost.reason, control: c });
      }
    } else if (c.op !== 'lease' && typeof c.req.token === 'string' && tokens.has(c.req.token) && (c.ans.accepted === false || c.ans.live === false)) {
      refusals.push({ jobId: String(c.req.jobId), token: c.req.token, reason: String(c.ans.reason), control: c });
    }
  }
  return refusals;
}

function abandonSummary(ctx: Context): AbandonSummary {
  const abandoned = abandonedLeases(attemptLeases(ctx));
  const ran = new Set<string>();
  for (const e of ctx.history) if (e.kind === 'worker_event' && e.ev.type === 'lease_granted' && abandoned.has(e.ev.token)) ran.add(e.ev.token);
  return { grants: abandoned.size, ran: ran.size, refused: refusalsOf(ctx, abandoned).length };
}

function oneLeasePerAttempt(ctx: Context): InvariantResult {
  const violations: Violation[] = [];
  // Two leases for one attempt are one abandoned grant and the next: the earlier one must
  // never have been taken up (a token is never live beside another of its attempt), and
  // nothing from it accepted after the next was granted.
  const leases = attemptLeases(ctx);
  for (const [k, list] of leases) {
    const jobId = k.split('@')[0]!;
    for (const lease of list) {
      const workers = new Set(lease.grants.map((g) => String(g.req.worker)));
      if (workers.size > 1) {
        violations.push({
          jobId,
          message: `attempt ${k}: token ${lease.token} was granted to ${workers.size} workers (${[...workers].join(', ')})`,
          focus: [...lease.grants, ...ctx.ledgerEvent(jobId)],
          events: ctx.eventsOf(jobId),
        });
      }
    }
    for (const [i, lease] of list.slice(0, -1).entries()) {
      if (!lease.takenUpBy) continue;
      violations.push({
        jobId,
        message: `attempt ${k} was leased ${list.length} times (${list.map((l) => `${l.worker} ${l.token}`).join('; ')}), but lease ${i + 1} had been taken up (${lease.takenUpBy.op} accepted): two live tokens for one attempt`,
        focus: [...list.flatMap((l) => l.grants), lease.takenUpBy, ...ctx.ledgerEvent(jobId)],
        events: ctx.eventsOf(jobId),
      });
    }
  }
  // An abandoned grant's token is dead once its attempt is granted again: whatever names it
  // after that is refused as superseded (ended, once the job ended). Before that it may also
  // be refused as expired: its TTL can pass before a sweep takes the grant back.
  const regrantedAt = new Map<string, number>();
  for (const list of leases.values()) list.slice(0, -1).forEach((lease, i) => regrantedAt.set(lease.token, list[i + 1]!.grants[0]!.t));
  for (const refusal of refusalsOf(ctx, abandonedLeases(leases))) {
    const askedAt = refusal.control.receivedAt ?? refusal.control.t;
    const allowed = askedAt > regrantedAt.get(refusal.token)! ? ['superseded', 'ended'] : ['superseded', 'ended', 'expired'];
    if (allowed.includes(refusal.reason)) continue;
    violations.push({
      jobId: refusal.jobId,
      message: `a ${refusal.control.op} naming the abandoned grant ${refusal.token} of ${refusal.jobId} was refused as ${refusal.reason}, not superseded`,
      focus: [refusal.control, ...ctx.ledgerEvent(refusal.jobId)],
      events: ctx.eventsOf(refusal.jobId),
    });
  }
  // Each lease runs at most once: a run of an abandoned grant (its answer came late, its
  // renewal was lost) is followed by the run of the next lease of the same attempt.
  const runs = new Map<string, number>();
  for (const e of ctx.history) if (e.kind === 'run_start') runs.set(`${e.jobId}@${e.attempt}`, (runs.get(`${e.jobId}@${e.attempt}`) ?? 0) + 1);
  for (const [k, n] of runs) {
    const granted = Math.max(1, leases.get(k)?.length ?? 0);
    if (n > granted) {
      const jobId = k.split('@')[0]!;
      violations.push({ jobId, message: `attempt ${k} ran ${n} times on ${granted} lease(s)`, events: ctx.eventsOf(jobId) });
    }
  }
  return result(
    'one-lease-per-attempt',
    'G2',
    'each attempt is leased once (again only after an abandoned grant, never taken up, whose token is then refused as superseded) and each lease runs once',
    leases.size + runs.size,
    violations,
  );
}

function oneResult(ctx: Context): InvariantResult {
  const title = 'one result message id per job: received, id = job id, every copy the same answer as the ledger';
  if (!ctx.hasLedger) return noLedger('one-result', 'G2', title);
  const violations: Violation[] = [];
  let checked = 0;
  for (const { job } of ctx.ledger.values()) {
    if (job.state !== 'finished' && job.state !== 'failed') continue;
    checked++;
    const received = ctx.results.get(job.id) ?? [];
    const problems: string[] = [];
    if (received.length === 0) problems.push('no result message received');
    const ids = new Set(received.map((r) => r.messageId));
    if (ids.size > 1) problems.push(`${ids.size} distinct message ids (${[...ids].join(', ')})`);
    if (received.some((r) => r.messageId !== job.id)) problems.push(`a message id differs from the job id`);
    const answers = new Set(received.map((r) => answerOf(r.body)));
    if (answers.size > 1) problems.push(`${answers.size} different answers`);
    const first = received[0]?.body;
    if (first && (first.state !== job.state || first.attempt !== job.attempt)) {
      problems.push(`the message says ${first.state}@${first.attempt}, the ledger ${job.state}@${job.attempt}`);
    }
    if (first && job.state === 'finished' && JSON.stringify(first.result ?? null) !== JSON.stringify(job.result ?? null)) {
      problems.push('the message carries another result than the ledger');
    }
    const published = ctx.eventsOf(job.id).filter((e): e is HistoryEventOf<'publish'> => e.kind === 'publish' && e.ok && e.routingKey !== undefined);
    const publishedIds = new Set(published.map((p) => p.messageId));
    if (publishedIds.size > 1) problems.push(`the relay published ${publishedIds.size} distinct result message ids`);
    if (problems.length > 0) {
      violations.push({
        jobId: job.id,
        message: `job ${job.id}: ${problems.join('; ')}`,
        focus: [...received, ...ctx.ledgerEvent(job.id)],
        events: ctx.eventsOf(job.id),
      });
    }
  }
  for (const [id, received] of ctx.results) {
    if (!ctx.ledger.has(id)) violations.push({ message: `result message for ${id}, a job the ledger does not have`, events: received });
  }
  return result('one-result', 'G2', title, checked, violations);
}

/**
 * With several orchestrators on one ledger, a job's effect must still happen once: any of
 * them may answer a settle or relay a result row, and none may take a second one. Per
 * job: one accepted settle that ended it, whichever orchestrator accepted it; every result
 * message any orchestrator published under one message id, all with one answer (a relay
 * that died after the broker's confirm may publish a row again: the same message).
 */
function oneEffectAcrossOrchestrators(ctx: Context): InvariantResult {
  const title = "a job's effect is never doubled across orchestrators: one accepted settle ending it, one result message id and answer";
  if (!ctx.hasLedger) return noLedger('one-effect-across-orchestrators', 'G2', title);
  const violations: Violation[] = [];
  const orchestrators = new Set<string>();
  const endingSettles = new Map<string, HistoryEventOf<'control'>[]>();
  for (const c of ctx.controls) {
    orchestrators.add(c.src);
    if (c.ans.accepted === true && terminalTransitions.has(String(c.ans.transition))) append(endingSettles, c.req.jobId as string, c);
  }
  let checked = 0;
  for (const { job } of ctx.ledger.values()) {
    if (job.state !== 'finished' && job.state !== 'failed') continue;
    checked++;
    const problems: string[] = [];
    const settles = endingSettles.get(job.id) ?? [];
    if (settles.length > 1) problems.push(`${settles.length} settles ending it accepted, by ${settles.map((s) => s.src).join(', ')}`);
    const published = ctx.eventsOf(job.id).filter((e): e is HistoryEventOf<'publish'> => e.kind === 'publish' && e.ok && e.routingKey !== undefined);
    for (const p of published) orchestrators.add(p.src);
    const ids = new Map<string, Set<string>>();
    for (const p of published) ids.set(String(p.messageId), (ids.get(String(p.messageId)) ?? new Set()).add(p.src));
    if (ids.size > 1) {
      problems.push(`result published under ${ids.size} message ids (${[...ids].map(([id, by]) => `${id} by ${[...by].join('+')}`).join('; ')})`);
    }
    const answers = new Set(published.map((p) => answerOf(p.body as ResultMessage)));
    if (answers.size > 1) problems.push(`${answers.size} different result answers published (by ${[...new Set(published.map((p) => p.src))].join(', ')})`);
    if (problems.length > 0) {
      violations.push({ jobId: job.id, message: `job ${job.id}: ${problems.join('; ')}`, focus: [...settles, ...published], events: ctx.eventsOf(job.id) });
    }
  }
  const note = `orchestrators seen: ${[...orchestrators].sort().join(', ') || 'none'}`;
  return result('one-effect-across-orchestrators', 'G2', title, checked, violations, note);
}

function answerOf(body: ResultMessage): string {
  return JSON.stringify([body.id, body.tenant, body.type, body.state, body.attempt, body.reason ?? null, body.result ?? null, body.error ?? null]);
}

function idempotency(ctx: Context): InvariantResult {
  const title = 'idempotency keys: one job per (tenant, key), repeats and retries included; no job nobody submitted';
  if (!ctx.hasLedger) return noLedger('idempotency', 'G2', title);
  const violations: Violation[] = [];
  for (const [k, entries] of ctx.ledgerByKey) {
    const info = ctx.keys.get(k);
    const [tenant, key] = k.split('\u0000');
    if (!info) {
      for (const { job } of entries)
        violations.push({ jobId: job.id, message: `job ${job.id} (${tenant}/${key}) was never submitted`, events: ctx.eventsOf(job.id) });
      continue;
    }
    if (entries.length > 1) {
      violations.push({
        message: `${tenant}/${key} made ${entries.length} jobs: ${entries.map((e) => e.job.id).join(', ')}`,
        events: entries.flatMap((e) => ctx.eventsOf(e.job.id)),
      });
    }
    for (const { job } of entries) {
      if (JSON.stringify(job.input) !== JSON.stringify(info.input)) {
        violations.push({ jobId: job.id, message: `job ${job.id} holds another input than submitted`, events: ctx.eventsOf(job.id) });
      }
      if (job.maxAttempts !== info.maxAttempts) {
        violations.push({
          jobId: job.id,
          message: `job ${job.id} allows ${job.maxAttempts} attempts, ${info.maxAttempts} were asked`,
          events: ctx.eventsOf(job.id),
        });
      }
      for (const submit of info.submits) {
        if (submit.acked && submit.jobId !== undefined && submit.jobId !== job.id) {
          violations.push({
            jobId: job.id,
            message: `the API answered ${submit.tenant}/${submit.key} with job ${submit.jobId}, the ledger has ${job.id}`,
            events: ctx.eventsOf(job.id),
          });
        }
      }
    }
  }
  for (const { job } of ctx.ledger.values()) {
    if (job.idempotencyKey === null)
      violations.push({ jobId: job.id, message: `job ${job.id} has no idempotency key; every chaos submission had one`, events: ctx.eventsOf(job.id) });
  }
  return result('idempotency', 'G2', title, ctx.keys.size, violations);
}

// ---------------------------------------------------------------- G3

function attemptOf(ctx: Context, jobId: string, attempt: number): AttemptRecord | undefined {
  return ctx.ledger.get(jobId)?.attempts.find((a) => a.attempt === attempt);
}

function noStaleAccepted(ctx: Context): InvariantResult {
  const title =
    'nothing from a stale attempt accepted: grants, renewals, fences, upload renewals and completes, progress and settles only for the live attempt';
  if (!ctx.hasLedger) return noLedger('no-stale-accepted', 'G3', title);
  const violations: Violation[] = [];
  let checked = 0;
  let current: HistoryEvent | undefined;
  const flag = (jobId: string, message: string) =>
    violations.push({ jobId, message, focus: [current!, ...ctx.ledgerEvent(jobId)], events: ctx.eventsOf(jobId) });
  const abandoned = abandonedLeases(attemptLeases(ctx));
  for (const c of ctx.controls) {
    current = c;
    // Staleness is judged by when the request arrived: its answer may come much later (an
    // orchestrator stalled, a ledger transaction waiting on a row lock) and still be right,
    // the ledger having ordered its guarded UPDATE before the one that ended the attempt.
    const askedAt = c.receivedAt ?? c.t;
    const accepted = (items: Array<{ jobId: string; attempt: number }>, what: string) => {
      for (const { jobId, attempt } of items) {
        checked++;
        const record = attemptOf(ctx, jobId, attempt);
        if (!record) flag(jobId, `${what} of ${jobId}@${attempt} accepted, but the ledger has no attempt ${attempt}`);
        else if (record.endedAt !== null && record.endedAt < askedAt - tolerance.answer) {
          flag(jobId, `${what} of ${jobId}@${attempt} accepted, asked ${askedAt - record.endedAt} ms after the attempt ended (${record.outcome})`);
        } else if (record.startedAt > c.t + tolerance.clock) {
          flag(jobId, `${what} of ${jobId}@${attempt} accepted before the attempt started`);
        }
      }
    };
    const jobId = c.req.jobId as string;
    const attempt = c.req.attempt as number;
    switch (c.op) {
      case 'heartbeat':
        accepted(Array.isArray(c.ans.renewed) ? (c.ans.renewed as Array<{ jobId: string; attempt: number }>) : [], 'renewal');
        break;
      case 'fence':
      case 'renew_upload':
      case 'complete_upload':
        // A live answer is an upload allowed (URLs signed, an object completed): only for the live attempt.
        if (c.ans.live === true) accepted([{ jobId, attempt }], c.op);
        break;
      case 'progress':
        if (c.ans.accepted === true) accepted([{ jobId, attempt }], 'progress');
        break;
      case 'lease':
        // An abandoned grant's attempt was granted again: the ledger's record is the later lease's.
        if (c.ans.granted === true && !abandoned.has(String(c.ans.token))) {
          checked++;
          const record = attemptOf(ctx, jobId, attempt);
          if (!record) flag(jobId, `lease of ${jobId}@${attempt} granted, but the ledger has no attempt ${attempt}`);
          else if (record.worker !== c.req.worker)
            flag(jobId, `lease of ${jobId}@${attempt} granted to ${String(c.req.worker)}, the ledger names ${record.worker}`);
          else if (record.endedAt !== null && record.endedAt < askedAt - tolerance.answer) {
            flag(jobId, `lease of ${jobId}@${attempt} granted (again), asked ${askedAt - record.endedAt} ms after the attempt ended (${record.outcome})`);
          }
        }
        break;
      case 'settle':
      case 'release': {
        if (c.ans.accepted !== true) break;
        checked++;
        const record = attemptOf(ctx, jobId, attempt);
        const expected = settleOutcome[String(c.ans.transition)];
        const job = ctx.ledger.get(jobId)?.job;
        if (!record) flag(jobId, `${c.op} of ${jobId}@${attempt} accepted, but the ledger has no attempt ${attempt}`);
        else if (record.outcome !== expected) {
          flag(
            jobId,
            `${c.op} of ${jobId}@${attempt} accepted as ${String(c.ans.transition)}, but the ledger says attempt ${attempt} ${record.outcome ?? 'never ended'}: a stale settle was accepted`,
          );
        } else if (record.endedAt !== null && record.endedAt < askedAt - tolerance.answer - 1000) {
          flag(jobId, `${c.op} of ${jobId}@${attempt} accepted long after the attempt ended`);
        } else if (terminalTransitions.has(String(c.ans.transition)) && job && job.attempt !== attempt) {
          flag(jobId, `${c.op} of ${jobId}@${attempt} ended the job, but the job is at attempt ${job.attempt}: a stale settle was accepted`);
        }
        break;
      }
      default:
        break;
    }
  }
  return result('no-stale-accepted', 'G3', title, checked, violations);
}

function staleOutput(ctx: Context): InvariantResult {
  const title = 'the fence: no attempt stores output after the ledger ended it, unless its fence had passed while it was live';
  if (!ctx.hasLedger) return noLedger('fenced-output', 'G3', title);
  const violations: Violation[] = [];
  let checked = 0;
  let raced = 0;
  for (const e of ctx.history) {
    if (e.kind !== 'worker_event' || e.ev.type !== 'output_stored') continue;
    checked++;
    const { jobId, attempt } = e.ev;
    const record = attemptOf(ctx, jobId, attempt);
    if (!record) {
      violations.push({ jobId, message: `${jobId}@${attempt} stored output, but the ledger has no attempt ${attempt}`, events: ctx.eventsOf(jobId) });
      continue;
    }
    const shadowed = shadowedOutputs(ctx.ledger.get(jobId)?.job, attempt, storedLocations(e.ev));
    if (shadowed.length > 0) {
      violations.push({
        jobId,
        message: `${jobId}@${attempt} stored ${shadowed.join(', ')} where the result names the settled attempt's output: a losing attempt's bytes are visible`,
        focus: [e, ...ctx.ledgerEvent(jobId)],
        events: ctx.eventsOf(jobId),
      });
      continue;
    }
    if (record.outcome === 'finished' || record.endedAt === null || e.t <= record.endedAt + tolerance.outputCopy) continue;
    // A fence that said "live" while the lease was live, then a pause (or a slow reply)
    // before the copy: the race every lease check has. The copy lands in the attempt's own
    // folder, which nobody reads, and the settle is refused; output-matches checks that.
    const ended = record.endedAt;
    const passed = ctx.controls.some(
      (c) => c.op === 'fence' && c.ans.live === true && c.req.jobId === jobId && c.req.attempt === attempt && c.t <= ended + tolerance.answer && c.t <= e.t,
    );
    if (passed) {
      raced++;
      continue;
    }
    violations.push({
      jobId,
      message: `${jobId}@${attempt} stored output ${e.t - ended} ms after the ledger ended that attempt (${record.outcome}), and no fence had passed: a stale attempt got through`,
      focus: [e, ...ctx.ledgerEvent(jobId)],
      events: ctx.eventsOf(jobId),
    });
  }
  const note =
    raced > 0
      ? `${raced} outputs were stored late after a fence that had passed while the lease was live (the fence-then-write race; harmless, attempt-scoped)`
      : undefined;
  return result('fenced-output', 'G3', title, checked, violations, note);
}

/** Where an output_stored event says each output went, as plain locations (a history recorded before `files` has only `outputs`). */
function storedLocations(ev: { outputs: Record<string, string>; files?: Record<string, { location: string }> }): Record<string, string> {
  return ev.files ? Object.fromEntries(Object.entries(ev.files).map(([name, file]) => [name, plainLocation(file.location)])) : ev.outputs;
}

/** The outputs an attempt other than the settled one stored at a location the job's result names. */
function shadowedOutputs(job: Job | undefined, attempt: number, stored: Record<string, string>): string[] {
  if (!job || job.state !== 'finished' || job.attempt === attempt) return [];
  const named = new Set([
    ...Object.values(job.result?.outputs ?? {}),
    ...Object.values(job.result?.outputFiles ?? {}).map((file) => plainLocation(file.location)),
  ]);
  return Object.entries(stored)
    .filter(([, location]) => named.has(location))
    .map(([name]) => name);
}

/** How the bytes `found` (by the runner after the run, or by the worker as it stored them) differ from what the result's entry names. */
function contentProblems(name: string, file: OutputFile, found: { bytes?: number; sha256?: string }, by: string): string[] {
  const problems: string[] = [];
  if (file.bytes !== undefined && found.bytes !== file.bytes) problems.push(`output ${name} ${by} holds ${found.bytes} bytes, the result names ${file.bytes}`);
  if (file.sha256 !== undefined && found.sha256 !== file.sha256)
    problems.push(`output ${name} ${by} has sha256 ${found.sha256}, the result names ${file.sha256}`);
  return problems;
}

function outputMatches(ctx: Context): InvariantResult {
  const title = "the stored output is the settled attempt's: in its (job, attempt) folder, with the bytes that attempt wrote";
  if (!ctx.hasLedger) return noLedger('output-matches', 'G3', title);
  const violations: Violation[] = [];
  let checked = 0;
  // Outputs are under the object store's root with `--store s3`, else in the workers' output folder.
  const outputRoot = ctx.config?.store?.root ?? ctx.config?.outputDir;
  for (const { job } of ctx.ledger.values()) {
    if (job.state !== 'finished') continue;
    checked++;
    const problems: string[] = [];
    const data = (job.result?.data ?? {}) as { attempt?: number; sha256?: string };
    if (data.attempt !== job.attempt) problems.push(`the result was made by attempt ${data.attempt}, the job settled as attempt ${job.attempt}`);
    const outputs = job.result?.outputs ?? {};
    if (Object.keys(outputs).length === 0) problems.push('the result names no output');
    // An attempt runs more than once after an abandoned grant: the result is one of its runs'.
    const written = ctx.eventsOf(job.id).filter((e): e is HistoryEventOf<'run_output'> => e.kind === 'run_output' && e.attempt === job.attempt);
    if (written.length > 0 && !written.some((w) => w.sha256 === data.sha256)) problems.push(`the result's digest is not the one attempt ${job.attempt} wrote`);
    // Where the result carries outputFiles, each must name the same location, and the
    // sha256 (and size) of the file found there and of the file the worker stored.
    const files = job.result?.outputFiles;
    const settledBy = ctx.ledger.get(job.id)?.attempts.find((a) => a.attempt === job.attempt)?.worker;
    const storedBySettled = ctx
      .eventsOf(job.id)
      .find(
        (e): e is HistoryEventOf<'worker_event'> & { ev: { type: 'output_stored' } } =>
          e.kind === 'worker_event' && e.ev.type === 'output_stored' && e.ev.attempt === job.attempt && (settledBy === undefined || e.worker === settledBy),
      );
    for (const [name, path] of Object.entries(outputs)) {
      if (outputRoot !== undefined && !path.startsWith(`${outputRoot}/${job.tenant}/${job.id}/${job.attempt}/`)) {
        problems.push(`output ${name} is stored at ${path}, not in attempt ${job.attempt}'s folder`);
      }
      const stored = ctx.eventsOf(job.id).find((e): e is HistoryEventOf<'stored_output'> => e.kind === 'stored_output' && e.name === name);
      if (!stored) problems.push(`output ${name} was not looked at`);
      else if (!stored.exists) problems.push(`output ${name} is missing at ${path}`);
      else if (data.sha256 !== undefined && stored.sha256 !== data.sha256) problems.push(`output ${name} holds other bytes than attempt ${job.attempt} wrote`);
      const file = files?.[name];
      if (files && !file) problems.push(`the result's outputFiles do not name output ${name}`);
      if (file) {
        if (plainLocation(file.location) !== path) problems.push(`outputFiles names ${name} at ${file.location}, outputs at ${path}`);
        if (stored?.exists) problems.push(...contentProblems(name, file, stored, 'as stored'));
        const byWorker = storedBySettled?.ev.files?.[name];
        if (byWorker) problems.push(...contentProblems(name, file, byWorker, 'as its worker stored it'));
      }
    }
    const received = ctx.results.get(job.id)?.[0]?.body;
    if (received && JSON.stringify(received.result?.outputs ?? {}) !== JSON.stringify(outputs))
      problems.push('the result message names other outputs than the ledger');
    if (received && files && JSON.stringify(received.result?.outputFiles ?? {}) !== JSON.stringify(files))
      problems.push('the result message names other outputFiles than the ledger');
    if (problems.length > 0) violations.push({ jobId: job.id, message: `job ${job.id}: ${problems.join('; ')}`, events: ctx.eventsOf(job.id) });
  }
  return result('output-matches', 'G3', title, checked, violations);
}

/**
 * The attempt an object of the store belongs to, `<root>/<tenant>/<job>/<attempt>/<name>`,
 * found by the ledger's jobs (a tenant or a name may hold slashes), or undefined.
 */
function attemptOfLocation(ctx: Context, root: string, location: string): { job: Job; attempt: number } | undefined {
  if (!location.startsWith(`${root}/`)) return undefined;
  const parts = location.slice(root.length + 1).split('/');
  for (let i = 1; i + 2 < parts.length; i++) {
    const job = ctx.ledger.get(parts[i]!)?.job;
    if (job && job.tenant === parts.slice(0, i).join('/') && /^[1-9][0-9]*$/.test(parts[i + 1]!)) return { job, attempt: Number(parts[i + 1]) };
  }
  return undefined;
}

function storeCleaned(ctx: Context): InvariantResult {
  const title = 'the store keeps only what was delivered: after the grace, nothing of a losing attempt is left under its prefix';
  const store = ctx.config?.store;
  if (!store) return result('store-cleaned', 'G3', title, 0, [], 'the folder store: each worker keeps its own outputs');
  if (!ctx.hasLedger) return noLedger('store-cleaned', 'G3', title);
  const final = ctx.history.find((e): e is HistoryEventOf<'store_final'> => e.kind === 'store_final');
  if (!final) return result('store-cleaned', 'G3', title, 0, [{ message: 'the history holds no listing of the store at the end', events: [] }]);
  const violations: Violation[] = [];
  let young = 0;
  for (const { location } of final.objects) {
    const ref = attemptOfLocation(ctx, store.root, location);
    if (!ref) {
      violations.push({ message: `${location} is no attempt's output of a job in the ledger`, events: [] });
      continue;
    }
    const { job } = ref;
    if (ref.attempt > job.attempt) {
      violations.push({
        jobId: job.id,
        message: `${location} is under attempt ${ref.attempt}, past the job's last (${job.attempt})`,
        events: ctx.eventsOf(job.id),
      });
      continue;
    }
    const decided = job.state === 'finished' || job.state === 'failed' || ref.attempt < job.attempt;
    if (!decided || (job.state === 'finished' && ref.attempt === job.attempt)) continue;
    // Upload URLs last until the lease's deadline (at most a TTL after the fence that handed
    // them out) plus the upload grace; the cleaner may wait the cleanup grace after that.
    const fences = ctx.controls.filter((c) => c.op === 'fence' && c.ans.live === true && c.req.jobId === job.id && c.req.attempt === ref.attempt);
    const lastFence = Math.max(0, ...fences.map((c) => c.t));
    const due = lastFence + (ctx.config?.leaseTtlMs ?? 0) + store.uploadGraceMs + store.cleanupGraceMs + tolerance.answer;
    if (final.cleanedUntil < due) {
      young++;
      continue;
    }
    violations.push({
      jobId: job.id,
      message: `${location} of ${job.id}@${ref.attempt}, an attempt that lost (the job ${job.state === 'finished' ? `delivered attempt ${job.attempt}` : job.state}), is still in the store ${final.cleanedUntil - due} ms after its grace ended`,
      focus: [...fences, ...ctx.ledgerEvent(job.id)],
      events: ctx.eventsOf(job.id),
    });
  }
  const uploaded = new Set(ctx.history.flatMap((e) => (e.kind === 'worker_event' && e.ev.type === 'output_stored' ? [`${e.ev.jobId}@${e.ev.attempt}`] : [])));
  const losers = [...uploaded].filter((key) => {
    const [jobId, attempt] = key.split('@');
    const job = ctx.ledger.get(jobId!)?.job;
    return job !== undefined && !(job.state === 'finished' && Number(attempt) === job.attempt);
  }).length;
  const notes = [
    `${losers} losing attempts had uploaded outputs (as their workers recorded; one killed before it heard back from the store records nothing)`,
    ...(young > 0 ? [`${young} objects of losing attempts were still within their grace`] : []),
  ];
  return result('store-cleaned', 'G3', title, final.objects.length + losers, violations, notes.join('; '));
}

// ---------------------------------------------------------------- G5

function attemptsBounded(ctx: Context): InvariantResult {
  const title = 'attempts count up from 1 without gaps, each after the backoff, never past the maximum';
  if (!ctx.hasLedger) return noLedger('attempts', 'G5', title);
  const violations: Violation[] = [];
  const c = ctx.config;
  for (const { job, attempts } of ctx.ledger.values()) {
    const problems: string[] = [];
    attempts.forEach((a, i) => {
      if (a.attempt !== i + 1) problems.push(`attempt #${i + 1} is numbered ${a.attempt}`);
    });
    if (attempts.length > job.maxAttempts) problems.push(`${attempts.length} attempts, ${job.maxAttempts} allowed`);
    if (job.attempt > job.maxAttempts) problems.push(`at attempt ${job.attempt}, ${job.maxAttempts} allowed`);
    if (attempts.length > 0 && (job.state === 'finished' || job.state === 'failed') && job.attempt !== attempts.length) {
      problems.push(`ended at attempt ${job.attempt} with ${attempts.length} attempts recorded`);
    }
    for (let i = 0; i + 1 < attempts.length; i++) {
      const a = attempts[i]!;
      const next = attempts[i + 1]!;
      if (a.outcome !== 'retried' && a.outcome !== 'expired' && a.outcome !== 'released')
        problems.push(`attempt ${a.attempt} ended ${a.outcome} and yet attempt ${next.attempt} followed`);
      if (a.endedAt === null) problems.push(`attempt ${a.attempt} never ended and yet attempt ${next.attempt} followed`);
      // A handed-back attempt's successor is due at once: no backoff to check.
      else if (c && a.outcome !== 'released' && next.startedAt < a.endedAt + backoff(c, a.attempt) - tolerance.clock) {
        problems.push(
          `attempt ${next.attempt} started ${next.startedAt - a.endedAt} ms after attempt ${a.attempt} ended; the backoff is ${backoff(c, a.attempt)} ms`,
        );
      }
    }
    if (job.state === 'failed' && job.failureReason === 'exhausted' && job.attempt < job.maxAttempts) {
      problems.push(`failed as exhausted at attempt ${job.attempt} of ${job.maxAttempts}`);
    }
    if (problems.length > 0) violations.push({ jobId: job.id, message: `job ${job.id}: ${problems.join('; ')}`, events: ctx.eventsOf(job.id) });
  }
  return result('attempts', 'G5', title, ctx.ledger.size, violations);
}

function permanentOnce(ctx: Context): InvariantResult {
  const title = 'a Permanent error runs once: it fails the job at once, never retried';
  if (!ctx.hasLedger) return noLedger('permanent-once', 'G5', title);
  const violations: Violation[] = [];
  let checked = 0;
  for (const { job, attempts } of ctx.ledger.values()) {
    const problems: string[] = [];
    for (const a of attempts) {
      if (a.error?.class === 'permanent' && a.attempt !== attempts.length)
        problems.push(`attempt ${a.attempt} failed permanently and yet attempt ${a.attempt + 1} followed`);
      if (a.outcome === 'retried' && a.error?.class === 'permanent') problems.push(`attempt ${a.attempt}'s permanent error was retried`);
    }
    const info = ctx.keyInfoOf(job);
    if (info?.input.behaviour === 'permanent') {
      checked++;
      if (job.state === 'finished') problems.push('a job that always fails permanently finished');
      const permanentRuns = ctx
        .eventsOf(job.id)
        .filter((e): e is HistoryEventOf<'run_raise'> => e.kind === 'run_raise' && e.class === 'permanent')
        .filter((e) => !takenAway(attempts.find((a) => a.attempt === e.attempt)?.outcome));
      if (permanentRuns.length > 1) problems.push(`${permanentRuns.length} runs raised the permanent error and were counted`);
      if (job.state === 'failed' && job.failureReason === 'permanent') {
        const later = ctx.eventsOf(job.id).filter((e) => e.kind === 'run_start' && e.attempt > job.attempt);
        if (later.length > 0) problems.push(`ran again (attempt ${(later[0] as HistoryEventOf<'run_start'>).attempt}) after failing permanently`);
        if (attempts.slice(0, -1).some((a) => !takenAway(a.outcome)))
          problems.push('an attempt before the permanent failure ended otherwise than by losing its lease');
      } else if (job.state === 'failed' && attempts.some((a) => !takenAway(a.outcome))) {
        problems.push(`failed ${job.failureReason}, though an attempt ended by itself (a permanent error should have failed it as permanent)`);
      }
    }
    if (problems.length > 0) violations.push({ jobId: job.id, message: `job ${job.id}: ${problems.join('; ')}`, events: ctx.eventsOf(job.id) });
  }
  return result('permanent-once', 'G5', title, checked, violations);
}

/** An attempt that did not end by itself: its lease ran out, or its worker handed it back (Fatal, stopping). */
function takenAway(outcome: string | null | undefined): boolean {
  return outcome === 'expired' || outcome === 'released';
}

function transientRetried(ctx: Context): InvariantResult {
  const title = 'a Transient error (or a crash) is retried until attempts run out, then failed/exhausted';
  if (!ctx.hasLedger) return noLedger('transient-retried', 'G5', title);
  const violations: Violation[] = [];
  let checked = 0;
  for (const { job, attempts } of ctx.ledger.values()) {
    const info = ctx.keyInfoOf(job);
    const behaviour = info?.input.behaviour;
    if (behaviour !== 'transient' && behaviour !== 'crash') continue;
    checked++;
    const failUntil = info!.input.failUntil ?? 1;
    const problems: string[] = [];
    if (job.state === 'finished' && job.attempt < failUntil)
      problems.push(`finished at attempt ${job.attempt}, though attempts before ${failUntil} always fail`);
    if (job.state === 'failed' && job.failureReason !== 'exhausted') problems.push(`failed ${job.failureReason}, not exhausted`);
    if (job.state === 'failed' && attempts.length < job.maxAttempts) problems.push(`failed after ${attempts.length} of ${job.maxAttempts} attempts`);
    if (problems.length > 0)
      violations.push({
        jobId: job.id,
        message: `job ${job.id} (${behaviour}, fails until attempt ${failUntil}): ${problems.join('; ')}`,
        events: ctx.eventsOf(job.id),
      });
  }
  return result('transient-retried', 'G5', title, checked, violations);
}

function scratchReserve(ctx: Context): InvariantResult {
  const title = 'a job that writes past its scratch reserve never finishes: each attempt that ends by itself fails Permanent resource_limit';
  if (!ctx.hasLedger) return noLedger('scratch-reserve', 'G5', title);
  const violations: Violation[] = [];
  let checked = 0;
  for (const { job, attempts } of ctx.ledger.values()) {
    if (ctx.keyInfoOf(job)?.input.behaviour !== 'over-reserve') continue;
    checked++;
    const problems: string[] = [];
    if (job.state === 'finished') problems.push('finished, though it writes past its reserve');
    for (const a of attempts) {
      if (a.error === null || takenAway(a.outcome)) continue;
      if (a.error.class !== 'permanent' || a.error.code !== 'resource_limit') {
        problems.push(`attempt ${a.attempt} ended ${a.error.class} ${a.error.code}, not permanent resource_limit`);
      }
    }
    if (problems.length > 0) violations.push({ jobId: job.id, message: `job ${job.id} (over-reserve): ${problems.join('; ')}`, events: ctx.eventsOf(job.id) });
  }
  return result('scratch-reserve', 'G5', title, checked, violations);
}

function fatalStops(ctx: Context): InvariantResult {
  const violations: Violation[] = [];
  let checked = 0;
  for (const e of ctx.history) {
    if (e.kind !== 'worker_event' || e.ev.type !== 'fatal') continue;
    checked++;
    const exit = ctx.history.find((x): x is HistoryEventOf<'proc_exit'> => x.kind === 'proc_exit' && x.child === e.pid && x.t >= e.t);
    if (!exit) violations.push({ message: `worker pid ${e.pid} hit a Fatal error and never exited`, events: [e] });
    else if (exit.cause !== 'nemesis' && exit.cause !== 'shutdown' && exit.code !== fatalExitCode) {
      violations.push({
        message: `worker pid ${e.pid} hit a Fatal error and exited with code ${exit.code} signal ${exit.signal}, not ${fatalExitCode}`,
        events: [e, exit],
      });
    }
  }
  return result('fatal-stops-worker', 'G5', `a Fatal error stops its worker, which exits ${fatalExitCode} to be restarted clean`, checked, violations);
}

// ---------------------------------------------------------------- G4, G6

function ackEarly(ctx: Context): InvariantResult {
  const violations: Violation[] = [];
  const timeout = ctx.config?.consumerTimeoutMs ?? Infinity;
  // A consumer cut off while its own connection was cut, slowed or frozen by the nemesis
  // timed out because its acks could not get through, not because its jobs were long.
  const windows = ctx.faultWindows();
  let excused = 0;
  for (const e of ctx.history) {
    if (e.kind === 'broker_event' && e.type === 'consumer_interrupted' && /time(d)? ?out/i.test(e.reason ?? '')) {
      const cut = windows.some((w) => w.target === e.src && w.start <= e.t && w.end >= e.t - timeout - 2000);
      if (cut) {
        excused++;
        continue;
      }
      violations.push({ message: `${e.src} (pid ${e.pid}): consumer of ${e.queue} cut off by the broker: ${e.reason}`, events: [e] });
    }
  }
  // Evidence the check means something: runs longer than the broker's consumer timeout.
  let longRuns = 0;
  for (const e of ctx.history) {
    if (e.kind !== 'run_start') continue;
    const done = ctx
      .eventsOf(e.jobId)
      .find((x) => x.kind === 'worker_event' && x.ev.type === 'job_done' && (x.ev as { attempt: number }).attempt === e.attempt);
    if (done && done.t - e.t > timeout) longRuns++;
  }
  const note =
    `${longRuns} runs outlasted the ${timeout} ms consumer timeout` +
    (excused > 0 ? `; ${excused} timeouts of consumers whose connection the nemesis had cut or frozen were excused` : '');
  return result('ack-early', 'G4', "no consumer is cut off by the broker's consumer timeout, however long its jobs run", longRuns, violations, note);
}

function sweepPrompt(ctx: Context): InvariantResult {
  const title = 'an abandoned lease is taken back within lease TTL + sweep interval of its last renewal';
  if (!ctx.hasLedger || !ctx.config) return noLedger('sweep-prompt', 'G6', title);
  const c = ctx.config;
  const lastRenewal = new Map<string, number>();
  for (const control of ctx.controls) {
    if (control.op === 'lease' && control.ans.granted === true) lastRenewal.set(`${String(control.req.jobId)}@${String(control.req.attempt)}`, control.t);
    if (control.op === 'heartbeat' && Array.isArray(control.ans.renewed)) {
      for (const r of control.ans.renewed as Array<{ jobId: string; attempt: number }>) lastRenewal.set(`${r.jobId}@${r.attempt}`, control.t);
    }
  }
  const violations: Violation[] = [];
  let checked = 0;
  let excused = 0;
  for (const { job, attempts } of ctx.ledger.values()) {
    for (const a of attempts) {
      if (a.outcome !== 'expired' || a.endedAt === null) continue;
      const renewed = lastRenewal.get(`${job.id}@${a.attempt}`);
      if (renewed === undefined) continue;
      if (ctx.orchestratorDownDuring(renewed, a.endedAt)) {
        excused++;
        continue;
      }
      checked++;
      const limit = c.leaseTtlMs + c.sweepMs + tolerance.sweep;
      if (a.endedAt - renewed > limit) {
        violations.push({
          jobId: job.id,
          message: `${job.id}@${a.attempt} expired ${a.endedAt - renewed} ms after its last renewal (limit ${limit} ms)`,
          events: ctx.eventsOf(job.id),
        });
      }
    }
  }
  return result(
    'sweep-prompt',
    'G6',
    title,
    checked,
    violations,
    excused > 0 ? `${excused} expiries spanned an orchestrator restart and were not timed` : undefined,
  );
}

function liveness(ctx: Context): InvariantResult {
  const title = 'every job terminal within the liveness bound after the last fault healed';
  if (!ctx.hasLedger) return noLedger('liveness', 'G6', title);
  const violations: Violation[] = [];
  const bound = ctx.livenessBoundMs();
  const drain = ctx.history.find((e): e is HistoryEventOf<'drain'> => e.kind === 'drain');
  if (drain && !drain.complete) {
    violations.push({
      message: `the drain gave up after ${drain.waitedMs} ms with ${drain.missing.length} acknowledged submissions unanswered`,
      events: [drain],
    });
  }
  for (const { job } of ctx.ledger.values()) {
    const info = ctx.keyInfoOf(job);
    const from = Math.max(ctx.lastHealAt, info?.firstAckAt ?? job.createdAt);
    if (job.endedAt === null) continue; // no-loss reports it
    if (job.endedAt > from + bound) {
      violations.push({
        jobId: job.id,
        message: `job ${job.id} ended ${job.endedAt - from} ms after the last heal (bound ${bound} ms)`,
        events: ctx.eventsOf(job.id),
      });
    }
  }
  return result(
    'liveness',
    'G6',
    title,
    ctx.ledger.size,
    violations,
    `bound ${bound} ms; the last job ended ${Math.max(0, ctx.lastTerminalAt - ctx.lastHealAt)} ms after the last heal`,
  );
}

// ---------------------------------------------------------------- G7, G8

function admission(ctx: Context): InvariantResult {
  const slots = ctx.config?.slots ?? Infinity;
  const violations: Violation[] = [];
  const running = new Map<number, Set<string>>();
  let checked = 0;
  for (const e of ctx.history) {
    if (e.kind === 'proc_exit' && e.role === 'worker') running.delete(e.child);
    if (e.kind !== 'worker_event') continue;
    const ev = e.ev;
    const set = running.get(e.pid) ?? new Set<string>();
    running.set(e.pid, set);
    if (ev.type === 'lease_granted') {
      checked++;
      set.add(`${ev.jobId}@${ev.attempt}`);
      if (set.size > slots) {
        violations.push({
          jobId: ev.jobId,
          message: `worker pid ${e.pid} ran ${set.size} jobs at once with ${slots} slots (${[...set].join(', ')})`,
          events: [e],
        });
      }
    } else if (ev.type === 'job_done') {
      set.delete(`${ev.jobId}@${ev.attempt}`);
    }
  }
  return result('admission', 'G7', 'a worker never runs more jobs than its slots', checked, violations);
}

/**
 * Fair dispatch's limits (issue 15): at no moment more live leases than a tenant's running
 * limit, or than a concurrency key's limit among its tenant's jobs. A lease is the
 * attempt's span in the ledger's history, from its grant to its end (a settle, a release,
 * or the sweep that reaped it; still open at the end of the run: to the end). The sweep
 * reaps before the dispatcher counts, so a reaped attempt ends before the next one of
 * its tenant is released; ends are taken before starts at the same instant.
 */
function limitsHeld(ctx: Context): InvariantResult {
  const title = "never more live leases than a tenant's running limit or a concurrency key's limit (abandoned grants included)";
  if (!ctx.hasLedger) return noLedger('limits', 'G7', title);
  const groups = new Map<string, { limit: number; what: string; spans: Array<{ from: number; to: number; ref: string; jobId: string }> }>();
  const add = (key: string, limit: number, what: string, span: { from: number; to: number; ref: string; jobId: string }) => {
    let group = groups.get(key);
    if (!group) groups.set(key, (group = { limit, what, spans: [] }));
    group.spans.push(span);
  };
  let checked = 0;
  const addSpan = (job: Job, span: { from: number; to: number; ref: string; jobId: string }) => {
    checked++;
    const tenantLimit = ctx.config?.tenantLimits?.[job.tenant];
    if (tenantLimit !== undefined) add(`tenant:${job.tenant}`, tenantLimit, `tenant ${job.tenant}`, span);
    if (job.concurrencyKey != null)
      add(`key:${job.tenant}:${job.concurrencyKey}`, job.concurrencyLimit ?? 1, `key ${job.concurrencyKey} of ${job.tenant}`, span);
  };
  for (const { job, attempts } of ctx.ledger.values()) {
    for (const attempt of attempts) {
      addSpan(job, { from: attempt.startedAt, to: attempt.endedAt ?? Infinity, ref: `${job.id}@${attempt.attempt}`, jobId: job.id });
    }
  }
  // An abandoned grant left no attempt record, but held its slot until the sweep took it
  // back: at least from its answer until its grant window had passed since its request came.
  const windowMs = ctx.config?.grantWindowMs === undefined ? 15_000 : ctx.config.grantWindowMs;
  for (const [k, list] of attemptLeases(ctx)) {
    const job = ctx.ledger.get(k.split('@')[0]!)?.job;
    if (!job || windowMs === null) continue;
    for (const [i, lease] of list.slice(0, -1).entries()) {
      const grant = lease.grants[0]!;
      const next = list[i + 1]!.grants[0]!;
      const to = Math.min((grant.receivedAt ?? grant.t) + windowMs, next.receivedAt ?? next.t);
      if (to > grant.t) addSpan(job, { from: grant.t, to, ref: `${k} (abandoned grant ${lease.token})`, jobId: job.id });
    }
  }
  const violations: Violation[] = [];
  for (const { limit, what, spans } of groups.values()) {
    const edges = spans.flatMap((span) => [
      { at: span.from, delta: 1, span },
      { at: span.to, delta: -1, span },
    ]);
    edges.sort((a, b) => a.at - b.at || a.delta - b.delta);
    const live = new Set<(typeof spans)[number]>();
    for (const edge of edges) {
      if (edge.delta < 0) live.delete(edge.span);
      else live.add(edge.span);
      if (live.size > limit) {
        violations.push({
          jobId: edge.span.jobId,
          message: `${what}: ${live.size} live leases at ${edge.at} with a limit of ${limit} (${[...live].map((s) => s.ref).join(', ')})`,
          events: [],
        });
        break;
      }
    }
  }
  return result('limits', 'G7', title, checked, violations);
}

function tenancy(ctx: Context): InvariantResult {
  const title = 'the tenant travels with the job: work and result messages, outputs, runs';
  if (!ctx.hasLedger) return noLedger('tenancy', 'G8', title);
  const violations: Violation[] = [];
  let checked = 0;
  for (const { job } of ctx.ledger.values()) {
    checked++;
    const problems: string[] = [];
    const info = ctx.keyInfoOf(job);
    if (info && info.tenant !== job.tenant) problems.push(`submitted by ${info.tenant}, recorded for ${job.tenant}`);
    for (const e of ctx.eventsOf(job.id)) {
      if (e.kind === 'result') {
        if (e.body.tenant !== job.tenant) problems.push(`result message for tenant ${e.body.tenant}`);
        if (!e.routingKey.startsWith(`${job.tenant}.${job.type}.`)) problems.push(`result routed as ${e.routingKey}`);
      } else if (e.kind === 'publish') {
        const body = e.body as { tenant?: string };
        if (body.tenant !== job.tenant || e.tenantHeader !== job.tenant)
          problems.push(`message published for tenant ${body.tenant} with header ${e.tenantHeader}`);
      } else if (e.kind === 'run_start' && e.tenant !== job.tenant) {
        problems.push(`attempt ${e.attempt} ran for tenant ${e.tenant}`);
      }
    }
    for (const path of Object.values(job.result?.outputs ?? {})) {
      if (!path.includes(`/${job.tenant}/${job.id}/`)) problems.push(`output stored at ${path}, outside the tenant's folder`);
    }
    if (problems.length > 0)
      violations.push({ jobId: job.id, message: `job ${job.id} (${job.tenant}): ${[...new Set(problems)].join('; ')}`, events: ctx.eventsOf(job.id) });
  }
  return result('tenancy', 'G8', title, checked, violations);
}

// ---------------------------------------------------------------- the end state

function quiescent(ctx: Context): InvariantResult {
  const violations: Violation[] = [];
  const outbox = ctx.history.find((e): e is HistoryEventOf<'outbox_final'> => e.kind === 'outbox_final');
  const queues = ctx.history.find((e): e is HistoryEventOf<'queues_final'> => e.kind === 'queues_final');
  if (!outbox) violations.push({ message: 'no final outbox count in the history', events: [] });
  else if (outbox.unsent > 0) violations.push({ message: `${outbox.unsent} outbox rows never sent`, events: [outbox] });
  if (!queues) violations.push({ message: 'no final queue depths in the history', events: [] });
  else if (queues.error) violations.push({ message: `queue depths could not be read: ${queues.error}`, events: [queues] });
  else {
    for (const q of queues.queues) {
      if (q.messages > 0 || q.unacked > 0)
        violations.push({ message: `queue ${q.name} still holds ${q.messages} ready and ${q.unacked} unacked messages`, events: [queues] });
    }
  }
  return result('quiescent', 'end', 'the outbox and every queue empty at the end', (queues?.queues.length ?? 0) + 1, violations);
}

function processHealth(ctx: Context): InvariantResult {
  const violations: Violation[] = [];
  let checked = 0;
  for (const e of ctx.procEvents) {
    if (e.kind !== 'proc_exit') continue;
    checked++;
    if (e.cause === 'unexpected' && !(e.role === 'worker' && e.code === fatalExitCode)) {
      violations.push({ message: `${e.name} (pid ${e.child}) died on its own: code ${e.code}, signal ${e.signal}${e.tail ? `\n${e.tail}` : ''}`, events: [e] });
    }
    if (e.cause === 'shutdown' && e.code !== 0) {
      violations.push({ message: `${e.name} (pid ${e.child}) did not stop cleanly at the end: code ${e.code}, signal ${e.signal}`, events: [e] });
    }
  }
  return result(
    'process-health',
    'ops',
    'no process dies unless the nemesis kills it or a Fatal job stops it; each stops cleanly at the end',
    checked,
    violations,
  );
}

/** Why the orchestrator's answer to a forged request is not a refusal, or undefined when it is. */
function forgeryAccepted(forgery: HistoryEventOf<'forgery'>): string | undefined {
  const { ans } = forgery;
  if (!forgery.withKey) return ans.op === 'error' && ans.code === 'unauthorized' ? undefined : 'answered without the fleet key';
  switch (forgery.op) {
    case 'lease':
      return ans.granted === true ? `granted, token ${String(ans.token)}` : undefined;
    case 'settle':
      return ans.accepted === true ? `accepted as ${String(ans.transition)}` : undefined;
    case 'inputs':
      return ans.live === true ? `answered live${Array.isArray(ans.downloads) ? `, with ${ans.downloads.length} input URL(s)` : ''}` : undefined;
    case 'heartbeat':
      if (Array.isArray(ans.renewed) && ans.renewed.length > 0) return 'renewed a lease with a guessed token';
      // A new name with the fleet key is a new worker; a live member's name is not the forger's to use.
      return forgery.impersonates && ans.op !== 'error' ? `taken for live worker ${String(forgery.req.worker)}` : undefined;
    default:
      return `unknown forged operation ${forgery.op}`;
  }
}

function forgeriesRefused(ctx: Context): InvariantResult {
  const title =
    "no forged control request is accepted: a lease without the holder's secret, a heartbeat for another live worker, a settle or an inputs request with a guessed token, anything without the fleet key";
  const violations: Violation[] = [];
  let checked = 0;
  // A lease granted after an abandoned grant of the same attempt found its job queued again:
  // the fleet key lets an insider lease queued work, so no running job's lease was taken.
  const afterAbandon = new Set<string>();
  for (const list of attemptLeases(ctx).values()) for (const lease of list.slice(1)) afterAbandon.add(lease.token);
  let queuedAgain = 0;
  for (const event of ctx.history) {
    if (event.kind !== 'forgery') continue;
    checked++;
    const accepted = forgeryAccepted(event);
    if (accepted && event.withKey && event.op === 'lease' && afterAbandon.has(String(event.ans.token))) {
      queuedAgain++;
      continue;
    }
    if (accepted) {
      const jobId = typeof event.req.jobId === 'string' ? event.req.jobId : undefined;
      violations.push({
        ...(jobId ? { jobId } : {}),
        message: `a forged ${event.op} (${event.withKey ? 'with' : 'without'} the fleet key) was ${accepted}`,
        events: [event, ...(jobId ? ctx.ledgerEvent(jobId) : [])],
      });
    }
  }
  for (const { job, event } of ctx.ledger.values()) {
    if ((job.result?.data as { mark?: unknown } | undefined)?.mark === forgedResultMark) {
      violations.push({ jobId: job.id, message: `job ${job.id} stores the adversary's forged result`, events: [event] });
    }
  }
  const note =
    checked === 0
      ? 'the adversary got no answer during the run'
      : queuedAgain > 0
        ? `${queuedAgain} forged leases with the fleet key were granted jobs whose grant had just been abandoned (queued again, not running)`
        : undefined;
  return result('forgeries-refused', 'G2/G3', title, checked, violations, note);
}
