/**
 * The model of the ledger property test: the operations a run is made of (`Op`), what the
 * ledger must do for each (`Simulation`, which calls the real ledger, predicts its answer and
 * checks it), and the invariants checked after every step and once the operations stop.
 */
import assert from 'node:assert/strict';

import type { ManualClock } from '../../../src/core/clock.js';
import type { SerializedError } from '../../../src/core/errors.js';
import { LedgerError } from '../../../src/ledger/errors.js';
import {
  backoffFor,
  type DispatchReport,
  type Job,
  type LeaseLoss,
  type LeaseRef,
  type Ledger,
  type LedgerConfig,
  type SettleOutcome,
  type SettleResult,
  type SubmitParams,
  type WorkMessage,
} from '../../../src/ledger/ledger.js';
import { isTerminal, type FailureReason, type JobState } from '../../../src/ledger/states.js';
import { assertResultBody, errors, proofOf } from '../testing.js';

/** Short enough that clock jumps cross every deadline, backoff and redispatch period. */
export const propertyConfig: LedgerConfig = {
  leaseTtlMs: 10_000,
  backoffBaseMs: 1_000,
  backoffMaxMs: 4_000,
  defaultMaxAttempts: 3,
  redispatchAfterMs: 15_000,
  // Under the TTL, so that a grant nobody renews is abandoned (same attempt) before it could expire.
  grantWindowMs: 4_000,
  // The suites below test the ledger's edges with the work message written at submit and requeue; dispatch.ts tests fair mode.
  dispatch: 'fifo',
};

/** Fair mode: one fleet member offers every type with this many slots, heard from within the window for the whole run. */
export const FLEET_SLOTS = 3;
export const FLEET_WINDOW_MS = 1_000_000_000_000;

export const TENANTS = ['acme', 'globex'] as const;
export const TYPES = ['transcode', 'render'] as const;
export const WORKERS = ['w0', 'w1', 'w2'] as const;

export type OutcomeKind = 'finished' | 'permanent' | 'transient' | 'fatal';
export interface SubmitSpec {
  tenant: number;
  type: number;
  key: number | null;
  maxAttempts: number | null;
}

/** One step of a run. Indexes are taken modulo what exists when the step runs. */
export type Op =
  | { k: 'submit'; s: SubmitSpec }
  | { k: 'submitMany'; items: SubmitSpec[] }
  | { k: 'relay'; lose: boolean }
  | { k: 'grant'; w: number; msg: number; redelivery: boolean; future: boolean }
  | { k: 'grantRace'; msg: number; redelivery: boolean }
  /** A lease request naming a holder and its attempt, but without that worker process's proof. */
  | { k: 'forgedGrant'; h: number; withProof: 'none' | 'guessed' }
  | { k: 'renew'; w: number }
  | { k: 'check'; ref: number; forge: boolean }
  | { k: 'progress'; h: number; fraction: number }
  /** `forge`: the right job and attempt with a token the ledger never issued. */
  | { k: 'staleProgress'; ref: number; fraction: number; forge: boolean }
  | { k: 'settle'; h: number; outcome: OutcomeKind }
  | { k: 'staleSettle'; ref: number; outcome: OutcomeKind; forge: boolean }
  | { k: 'settleRace'; h: number }
  /** A worker hands a lease back (Fatal, or stopping); `stale`: any lease ever held, `forge` as above. */
  | { k: 'release'; ref: number; stale: boolean; forge: boolean }
  /** Picks among running jobs, jobs that have not ended, or all jobs. */
  | { k: 'cancel'; job: number; among: 'running' | 'open' | 'all'; tenant: 'own' | 'none' | 'other' }
  | { k: 'reject'; job: number }
  | { k: 'sweep' }
  /** The dispatcher's pass woken between sweeps: releases work, sweeps nothing. */
  | { k: 'releasePass' }
  | { k: 'advance'; ms: number }
  /** Moves the clock to a lease deadline or a backoff's end, give or take 1 ms. */
  | { k: 'advanceTo'; target: 'deadline' | 'notBefore'; pick: number; delta: -1 | 0 | 1 }
  | { k: 'crash'; w: number };

/** PLANRUN_PROPERTY_STATS=1 prints how often each call got each answer, to see what the runs exercise. */
export const stats: Map<string, number> | null = process.env.PLANRUN_PROPERTY_STATS ? new Map() : null;

/** What the model knows of one job. */
interface ModelJob {
  id: string;
  tenant: string;
  type: string;
  idempotencyKey: string | null;
  maxAttempts: number;
  state: JobState;
  attempt: number;
  notBefore: number;
  /** abandonAt: when the sweep takes the grant back unless renewed or progressed first (null: taken up). */
  lease: { token: string; deadline: number; holder: string; abandonAt: number | null } | null;
  /** The attempt whose grant was last abandoned: the only attempt that may be granted a second time. */
  abandonedAttempt: number;
  /** Token of the last granted attempt, kept after the job moves on. */
  lastToken: string | null;
  cancelRequested: boolean;
  failureReason: FailureReason | null;
  /** The job as first seen terminal: it must never change after that. */
  ended: Job | null;
  /** When the latest work message for the current attempt became due (for redispatch). */
  workDueAt: number;
  /** The attempt whose work message was written (fifo: at submit and requeue; fair: by a dispatch pass); 0: none. */
  released: number;
  maxGrantedAttempt: number;
  settlesWon: Map<number, number>;
  endings: number;
  resultRows: number;
  lastSeenAttempt: number;
}

type Expect = { ok: true } | { ok: false; reasons: LeaseLoss[] };

function outcomeFor(kind: OutcomeKind, step: number): SettleOutcome {
  const byClass: Record<Exclude<OutcomeKind, 'finished'>, SerializedError> = {
    permanent: errors.permanent,
    transient: errors.transient,
    fatal: errors.fatal,
  };
  return kind === 'finished' ? { kind: 'finished', result: { data: { step } } } : { kind: 'failed', error: byClass[kind] };
}

function forged(ref: LeaseRef): LeaseRef {
  return { ...ref, token: `${ref.token}-forged` };
}

function pickFromEnd<T>(list: readonly T[], n: number): T | undefined {
  if (list.length === 0) return undefined;
  return list[list.length - 1 - (n % list.length)];
}

export class Simulation {
  readonly jobs: ModelJob[] = [];
  readonly byId = new Map<string, ModelJob>();
  readonly idem = new Map<string, string>();
  /** Every work message the relay delivered; grants pick from it, old ones included. */
  readonly pool: WorkMessage[] = [];
  readonly tried = new Set<WorkMessage>();
  /** Every lease ever granted, with its worker. */
  readonly refs: Array<{ ref: LeaseRef; worker: string }> = [];
  readonly holds = new Map<string, LeaseRef[]>(WORKERS.map((w) => [w, []]));
  readonly tokens = new Set<string>();
  readonly trace: string[] = [];
  step = 0;
  readonly startedAt: number;

  constructor(
    readonly ledger: Ledger,
    readonly clock: ManualClock,
    readonly config: LedgerConfig,
  ) {
    this.startedAt = clock.now();
  }

  get now(): number {
    return this.clock.now();
  }

  log(line: string): void {
    this.trace.push(`#${this.step} t+${this.now - this.startedAt} ${line}`);
    if (stats) {
      // "grant w0 job@1 -> not_due" counts as "grant -> not_due".
      const [verb] = line.split(' ');
      const answer = line.includes(' -> ') ? line.slice(line.lastIndexOf(' -> ')).split(' ').slice(0, 3).join(' ') : '';
      const label =
        verb === 'renew'
          ? `renew ->${line.slice(line.lastIndexOf('lost') + 4).replace(/[0-9]+/g, 'N')}`.replace(/-> $/, '-> (all renewed)')
          : verb === 'sweep'
            ? `sweep ${line
                .split(' ')
                .slice(2, 14)
                .filter((w, i) => i % 2 === 1 || w !== '0')
                .join(' ')}`
            : `${verb}${answer.replace(/[0-9]+/g, 'N')}`;
      stats.set(label, (stats.get(label) ?? 0) + 1);
    }
  }

  /** What the ledger must answer for a lease ref, now. */
  expectFence(ref: LeaseRef, forSettle: boolean): Expect {
    const j = this.byId.get(ref.jobId);
    if (!j) return { ok: false, reasons: ['unknown_job'] };
    if (isTerminal(j.state)) {
      const own = ref.attempt === j.attempt && ref.token === j.lastToken;
      return { ok: false, reasons: own ? ['ended'] : ['ended', 'superseded'] };
    }
    if (j.state !== 'running' || !j.lease || j.attempt !== ref.attempt || j.lease.token !== ref.token) {
      return { ok: false, reasons: ['superseded'] };
    }
    if (j.lease.deadline <= this.now) {
      return { ok: false, reasons: !forSettle && j.cancelRequested ? ['expired', 'cancelled'] : ['expired'] };
    }
    if (!forSettle && j.cancelRequested) return { ok: false, reasons: ['cancelled'] };
    return { ok: true };
  }

  async jobAndOutbox(jobId: string): Promise<unknown> {
    return { job: await this.ledger.getJob(jobId), outbox: await this.ledger.outboxStats() };
  }

  // ---- operations ------------------------------------------------------------------------

  /**
   * The first key of `params` (in order, a batch's earlier items included) reused with
   * another type or a given maxAttempts other than its job's, or undefined: such a call
   * must fail whole with idempotency_conflict.
   */
  private idempotencyConflict(params: readonly SubmitParams[]): string | undefined {
    const seen = new Map<string, { type: string; maxAttempts: number }>();
    for (const p of params) {
      if (p.idempotencyKey === undefined) continue;
      const idemKey = `${p.tenant}\u0000${p.idempotencyKey}`;
      const jobId = this.idem.get(idemKey);
      const known = seen.get(idemKey) ?? (jobId === undefined ? undefined : this.byId.get(jobId));
      if (known === undefined) {
        seen.set(idemKey, { type: p.type, maxAttempts: p.maxAttempts ?? this.config.defaultMaxAttempts });
      } else if (known.type !== p.type || (p.maxAttempts !== undefined && p.maxAttempts !== known.maxAttempts)) {
        return `${p.tenant}/${p.idempotencyKey}`;
      }
    }
    return undefined;
  }

  async submit(specs: SubmitSpec[], many: boolean): Promise<void> {
    const params: SubmitParams[] = specs.map((s) => {
      // A keyed submission's input follows from its key, so a repeat differs from the first
      // only where the generator chose another type or maxAttempts.
      const p: SubmitParams = { tenant: TENANTS[s.tenant]!, type: TYPES[s.type]!, input: s.key === null ? { n: this.step } : { key: s.key } };
      if (s.key !== null) p.idempotencyKey = `key-${s.key}`;
      if (s.maxAttempts !== null) p.maxAttempts = s.maxAttempts;
      return p;
    });
    const conflict = this.idempotencyConflict(params);
    if (conflict !== undefined) {
      await assert.rejects(many ? this.ledger.submitMany(params) : this.ledger.submit(params[0]!), (error: unknown) => {
        assert.ok(
          error instanceof LedgerError && error.code === 'idempotency_conflict',
          `a reused key with another submission (${conflict}): ${String(error)}`,
        );
        return true;
      });
      this.log(`submit-conflict ${conflict}`);
      return;
    }
    const results = many ? await this.ledger.submitMany(params) : [await this.ledger.submit(params[0]!)];
    assert.equal(results.length, params.length, 'one answer per submission');
    params.forEach((p, i) => {
      const res = results[i]!;
      const idemKey = p.idempotencyKey === undefined ? undefined : `${p.tenant}\u0000${p.idempotencyKey}`;
      const existing = idemKey === undefined ? undefined : this.idem.get(idemKey);
      if (existing !== undefined) {
        assert.equal(res.created, false, `a known key (${p.tenant}, ${p.idempotencyKey}) returns created:false`);
        assert.equal(res.job.id, existing, 'a known key returns the same job');
        this.log(`submit-again ${p.tenant}/${p.idempotencyKey} (${existing})`);
        return;
      }
      assert.equal(res.created, true, 'a new submission creates a job');
      assert.ok(!this.byId.has(res.job.id), 'a new job gets a new id');
      assert.equal(res.job.state, 'queued');
      assert.equal(res.job.attempt, 1);
      assert.equal(res.job.notBefore, this.now);
      const j: ModelJob = {
        id: res.job.id,
        tenant: p.tenant,
        type: p.type,
        idempotencyKey: p.idempotencyKey ?? null,
        maxAttempts: p.maxAttempts ?? this.config.defaultMaxAttempts,
        state: 'queued',
        attempt: 1,
        notBefore: this.now,
        lease: null,
        lastToken: null,
        cancelRequested: false,
        failureReason: null,
        ended: null,
        workDueAt: this.now,
        released: this.config.dispatch === 'fifo' ? 1 : 0,
        maxGrantedAttempt: 0,
        abandonedAttempt: 0,
        settlesWon: new Map(),
        endings: 0,
        resultRows: 0,
        lastSeenAttempt: 1,
      };
      this.jobs.push(j);
      this.byId.set(j.id, j);
      if (idemKey !== undefined) this.idem.set(idemKey, j.id);
      this.log(`submit ${j.id} ${p.tenant}/${p.idempotencyKey ?? '-'} max=${j.maxAttempts}`);
    });
  }

  /** Takes due outbox rows, marks them sent and delivers the work messages (unless lost). */
  async relay(lose: boolean): Promise<WorkMessage[]> {
    const delivered: WorkMessage[] = [];
    for (;;) {
      const rows = await this.ledger.outboxTake(100);
      if (rows.length === 0) break;
      for (const row of rows) {
        assert.ok(row.availableAt <= this.now, `outbox row ${row.id} taken before it was due`);
        const j = this.byId.get(row.jobId);
        assert.ok(j, `outbox row for an unknown job ${row.jobId}`);
        if (row.kind === 'work') {
          assert.equal(row.body.jobId, j.id);
          assert.equal(row.body.tenant, j.tenant, 'the tenant travels in every work message');
          assert.equal(row.body.type, j.type);
          assert.ok(row.body.attempt >= 1 && row.body.attempt <= j.attempt, `work message for attempt ${row.body.attempt} of a job at ${j.attempt}`);
          if (!lose) delivered.push(row.body);
        } else {
          assert.ok(isTerminal(j.state), `a result row for ${j.id}, which is ${j.state} in the model`);
          j.resultRows += 1;
          assert.equal(j.resultRows, 1, `job ${j.id} has more than one result row`);
          const job = await this.ledger.getJob(j.id);
          assert.ok(job);
          assertResultBody(row.body, job);
        }
      }
      await this.ledger.outboxMarkSent(rows.map((r) => r.id));
      if (rows.length < 100) break;
    }
    this.pool.push(...delivered);
    this.log(`relay ${lose ? 'LOST ' : ''}${delivered.map((m) => `${m.jobId}@${m.attempt}`).join(' ')}`);
    return delivered;
  }

  expectGrant(jobId: string, attempt: number, worker?: string): { ok: true } | { ok: 'regrant' } | { ok: false; reason: string } {
    const j = this.byId.get(jobId);
    if (!j) return { ok: false, reason: 'unknown_job' };
    if (isTerminal(j.state)) return { ok: false, reason: 'ended' };
    if (attempt !== j.attempt) return { ok: false, reason: 'other_attempt' };
    // The holder asking again gets its own live lease back (its first answer was lost).
    if (j.state === 'running' && j.lease !== null && j.lease.holder === worker && j.lease.deadline > this.now && !j.cancelRequested) return { ok: 'regrant' };
    if (j.state === 'running') return { ok: false, reason: 'already_running' };
    if (j.notBefore > this.now) return { ok: false, reason: 'not_due' };
    return { ok: true };
  }

  recordGrant(jobId: string, attempt: number, worker: string, token: string, deadline: number, job: Job): void {
    const j = this.byId.get(jobId)!;
    assert.ok(!this.tokens.has(token), 'every grant gets a fresh token');
    assert.equal(deadline, this.now + this.config.leaseTtlMs, 'grant deadline = now + leaseTtlMs');
    assert.ok(
      attempt > j.maxGrantedAttempt || (attempt === j.maxGrantedAttempt && j.abandonedAttempt === attempt),
      `attempt ${attempt} granted after attempt ${j.maxGrantedAttempt} (abandoned: ${j.abandonedAttempt})`,
    );
    assert.ok(attempt <= j.maxAttempts, `attempt ${attempt} granted beyond maxAttempts ${j.maxAttempts}`);
    assert.equal(job.state, 'running');
    assert.equal(job.attempt, attempt);
    assert.equal(job.leaseToken, token);
    assert.equal(job.leaseHolder, worker);
    this.tokens.add(token);
    j.maxGrantedAttempt = attempt;
    j.state = 'running';
    j.lease = { token, deadline, holder: worker, abandonAt: this.abandonAt() };
    j.lastToken = token;
    const ref = { jobId, attempt, token };
    this.refs.push({ ref, worker });
    this.holds.get(worker)!.push(ref);
  }

  /** When a grant answered now is abandoned unless taken up. */
  abandonAt(): number | null {
    return this.config.grantWindowMs === null ? null : this.now + this.config.grantWindowMs;
  }

  /** A regrant answers again: a grant not yet taken up gets a new window. */
  regranted(j: ModelJob, deadline: number): void {
    j.lease!.deadline = deadline;
    if (j.lease!.abandonAt !== null) j.lease!.abandonAt = this.abandonAt();
  }

  async grant(worker: string, msg: WorkMessage, future: boolean): Promise<boolean> {
    const attempt = future ? msg.attempt + 1 : msg.attempt;
    const expected = this.expectGrant(msg.jobId, attempt, worker);
    const before = await this.jobAndOutbox(msg.jobId);
    const res = await this.ledger.grantLease({ jobId: msg.jobId, attempt, worker, holderProof: proofOf(worker) });
    this.log(`grant ${worker} ${msg.jobId}@${attempt} -> ${res.granted ? 'granted' : res.reason}`);
    if (expected.ok === 'regrant') {
      const j = this.byId.get(msg.jobId)!;
      assert.ok(res.granted, `the holder's repeated grant of ${msg.jobId}@${attempt} returns its lease, got ${JSON.stringify(res)}`);
      assert.equal(res.token, j.lease!.token, 'a regrant returns the same token');
      assert.equal(res.deadline, this.now + this.config.leaseTtlMs, 'a regrant renews the deadline');
      this.regranted(j, res.deadline);
      return true;
    }
    if (expected.ok) {
      assert.equal(res.granted, true, `grant ${msg.jobId}@${attempt} should win, got ${JSON.stringify(res)}`);
      assert.ok(res.granted);
      this.recordGrant(msg.jobId, attempt, worker, res.token, res.deadline, res.job);
      return true;
    }
    assert.equal(res.granted, false, `grant ${msg.jobId}@${attempt} should be refused (${expected.reason})`);
    assert.ok(!res.granted);
    assert.equal(res.reason, expected.reason, `grant ${msg.jobId}@${attempt}: refusal reason`);
    assert.deepEqual(await this.jobAndOutbox(msg.jobId), before, 'a refused grant changes nothing');
    return false;
  }

  /** Someone who knows a holder's public name asks for its lease: refused, and the holder keeps it unchanged. */
  async forgedGrant(ref: LeaseRef, worker: string, withProof: 'none' | 'guessed'): Promise<void> {
    const before = await this.jobAndOutbox(ref.jobId);
    const res = await this.ledger.grantLease({
      jobId: ref.jobId,
      attempt: ref.attempt,
      worker,
      ...(withProof === 'guessed' ? { holderProof: `guess-${worker}` } : {}),
    });
    this.log(`forgedGrant ${worker} ${ref.jobId}@${ref.attempt} -> ${res.granted ? 'GRANTED' : res.reason}`);
    assert.ok(!res.granted, `a lease request without the holder's proof must not be granted, got ${JSON.stringify(res)}`);
    assert.deepEqual(await this.jobAndOutbox(ref.jobId), before, 'a forged lease request changes nothing');
  }

  async grantRace(msg: WorkMessage): Promise<void> {
    const workers = [WORKERS[0], WORKERS[1]];
    const holder = workers.find((worker) => this.expectGrant(msg.jobId, msg.attempt, worker).ok === 'regrant');
    const expected = this.expectGrant(msg.jobId, msg.attempt);
    const results = await Promise.all(
      workers.map((worker) => this.ledger.grantLease({ jobId: msg.jobId, attempt: msg.attempt, worker, holderProof: proofOf(worker) })),
    );
    this.log(`grantRace ${msg.jobId}@${msg.attempt} -> ${results.map((r) => (r.granted ? 'granted' : r.reason)).join(',')}`);
    const winners = results.flatMap((r, i) => (r.granted ? [{ r, worker: workers[i]! }] : []));
    if (holder !== undefined) {
      // One racer already holds the live lease: it gets it back, the other is refused.
      assert.deepEqual(
        winners.map((w) => w.worker),
        [holder],
        `only the holder wins a race for its own lease, got ${JSON.stringify(results)}`,
      );
      const j = this.byId.get(msg.jobId)!;
      const { r } = winners[0]!;
      assert.ok(r.granted && r.token === j.lease!.token, 'the holder gets its own token back');
      this.regranted(j, r.deadline);
      return;
    }
    if (!expected.ok) {
      assert.equal(winners.length, 0, `racing grants of ${msg.jobId}@${msg.attempt} should all be refused (${expected.reason})`);
      for (const r of results) assert.ok(!r.granted && r.reason === expected.reason, `racing grant refused as ${JSON.stringify(r)}`);
      return;
    }
    assert.equal(winners.length, 1, `exactly one of two racing grants wins, got ${JSON.stringify(results)}`);
    for (const r of results) if (!r.granted) assert.equal(r.reason, 'already_running');
    const { r, worker } = winners[0]!;
    assert.ok(r.granted);
    this.recordGrant(msg.jobId, msg.attempt, worker, r.token, r.deadline, r.job);
  }

  async renew(worker: string): Promise<void> {
    const held = this.holds.get(worker)!;
    const expected = held.map((ref) => ({ ref, e: this.expectFence(ref, false) }));
    const res = await this.ledger.renewLeases({ worker, leases: held });
    this.log(
      `renew ${worker} [${held.map((r) => `${r.jobId}@${r.attempt}`).join(' ')}] -> renewed ${res.renewed.length}, lost ${res.lost.map((l) => l.reason).join(',')}`,
    );
    const key = (x: { jobId: string; attempt: number }) => `${x.jobId}@${x.attempt}`;
    const renewed = new Map(res.renewed.map((r) => [key(r), r]));
    const lost = new Map(res.lost.map((l) => [key(l), l]));
    assert.equal(renewed.size + lost.size, held.length, 'each lease is either renewed or lost, once');
    for (const { ref, e } of expected) {
      const j = this.byId.get(ref.jobId);
      if (e.ok) {
        const r = renewed.get(key(ref));
        assert.ok(r, `live lease ${key(ref)} should be renewed, got ${JSON.stringify(lost.get(key(ref)))}`);
        assert.equal(r.deadline, this.now + this.config.leaseTtlMs);
        j!.lease!.deadline = r.deadline;
        j!.lease!.abandonAt = null;
      } else {
        const l = lost.get(key(ref));
        assert.ok(l, `lease ${key(ref)} should be lost (${e.reasons.join('|')}) but was renewed`);
        assert.ok(e.reasons.includes(l.reason), `lease ${key(ref)} lost as ${l.reason}, expected ${e.reasons.join('|')}`);
      }
    }
    this.holds.set(
      worker,
      held.filter((ref) => renewed.has(key(ref))),
    );
  }

  async check(ref: LeaseRef): Promise<void> {
    const e = this.expectFence(ref, false);
    const res = await this.ledger.checkLease(ref);
    this.log(`check ${ref.jobId}@${ref.attempt} -> ${res.live ? 'live' : res.reason}`);
    this.assertFence(ref, e, res);
  }

  assertFence(ref: LeaseRef, e: Expect, res: Awaited<ReturnType<Ledger['checkLease']>>): void {
    const what = `checkLease ${ref.jobId}@${ref.attempt}`;
    if (e.ok) {
      assert.deepEqual(res, { live: true, deadline: this.byId.get(ref.jobId)!.lease!.deadline }, `${what} should be live`);
    } else {
      assert.equal(res.live, false, `${what} should not be live (${e.reasons.join('|')})`);
      assert.ok(!res.live && e.reasons.includes(res.reason), `${what}: ${JSON.stringify(res)}, expected ${e.reasons.join('|')}`);
    }
  }

  async progress(ref: LeaseRef, fraction: number): Promise<void> {
    const e = this.expectFence(ref, false);
    const before = await this.jobAndOutbox(ref.jobId);
    const res = await this.ledger.recordProgress({ ...ref, fraction, message: `step ${this.step}` });
    this.log(`progress ${ref.jobId}@${ref.attempt} ${fraction} -> ${res.accepted ? 'accepted' : res.reason}`);
    if (e.ok) {
      assert.deepEqual(res, { accepted: true }, `progress of live lease ${ref.jobId}@${ref.attempt}`);
      assert.equal((await this.ledger.getJob(ref.jobId))?.progress, fraction, 'accepted progress is stored');
      this.byId.get(ref.jobId)!.lease!.abandonAt = null;
    } else {
      assert.equal(res.accepted, false, `progress of ${ref.jobId}@${ref.attempt} should be refused (${e.reasons.join('|')})`);
      assert.ok(!res.accepted && e.reasons.includes(res.reason), `progress refused as ${JSON.stringify(res)}`);
      assert.deepEqual(await this.jobAndOutbox(ref.jobId), before, 'refused progress changes nothing');
    }
  }

  expectTransition(j: ModelJob, outcome: SettleOutcome): string {
    if (outcome.kind === 'finished') return 'finish';
    if (j.cancelRequested) return 'cancel_running';
    if (outcome.error.class === 'permanent') return 'fail_permanent';
    return j.attempt < j.maxAttempts ? 'retry' : 'exhaust';
  }

  applySettle(j: ModelJob, transition: string, job: Job): void {
    const attempt = j.attempt;
    const won = (j.settlesWon.get(attempt) ?? 0) + 1;
    j.settlesWon.set(attempt, won);
    assert.equal(won, 1, `two settles won for ${j.id}@${attempt}`);
    j.lease = null;
    switch (transition) {
      case 'finish':
        j.state = 'finished';
        break;
      case 'fail_permanent':
        j.state = 'failed';
        j.failureReason = 'permanent';
        break;
      case 'cancel_running':
        j.state = 'failed';
        j.failureReason = 'cancelled';
        break;
      case 'exhaust':
        j.state = 'failed';
        j.failureReason = 'exhausted';
        break;
      case 'retry':
        j.state = 'queued';
        j.attempt += 1;
        j.notBefore = this.now + backoffFor(this.config, attempt);
        j.workDueAt = j.notBefore;
        if (this.config.dispatch === 'fifo') j.released = j.attempt;
        break;
      case 'release':
        j.state = 'queued';
        j.attempt += 1;
        j.notBefore = this.now;
        j.workDueAt = j.notBefore;
        if (this.config.dispatch === 'fifo') j.released = j.attempt;
        break;
      default:
        assert.fail(`unknown transition ${transition}`);
    }
    if (isTerminal(j.state)) {
      this.ended(j);
    }
    assert.equal(job.state, j.state, `settle answered a job in state ${job.state}`);
    assert.equal(job.attempt, j.attempt, 'settle answered the job at the wrong attempt');
    if (transition === 'retry') assert.equal(job.notBefore, j.notBefore, 'retry notBefore = now + backoff');
    if (transition === 'release') assert.equal(job.notBefore, j.notBefore, 'release notBefore = now: no backoff');
  }

  /** A handed-back lease ends its attempt like a settle; the next attempt is due at once, and it still counts. */
  async release(ref: LeaseRef, holder: string | null): Promise<void> {
    const e = this.expectFence(ref, true);
    const j = this.byId.get(ref.jobId)!;
    const before = await this.jobAndOutbox(ref.jobId);
    const res = await this.ledger.release({ ...ref, error: errors.fatal });
    this.log(`release ${holder ?? 'stale'} ${ref.jobId}@${ref.attempt} -> ${res.accepted ? res.transition : res.reason}`);
    if (holder !== null) this.drop(holder, ref);
    if (e.ok) {
      assert.ok(res.accepted, `release of live lease ${ref.jobId}@${ref.attempt} should be accepted, got ${JSON.stringify(res)}`);
      const expected = j.cancelRequested ? 'cancel_running' : j.attempt < j.maxAttempts ? 'release' : 'exhaust';
      assert.equal(res.transition, expected, 'release transition');
      this.applySettle(j, res.transition, res.job);
      return;
    }
    assert.ok(
      !res.accepted && e.reasons.includes(res.reason),
      `release of ${ref.jobId}@${ref.attempt} should be refused (${e.reasons.join('|')}), got ${JSON.stringify(res)}`,
    );
    assert.deepEqual(await this.jobAndOutbox(ref.jobId), before, 'a refused release changes nothing');
  }

  async settle(ref: LeaseRef, kind: OutcomeKind, holder: string | null): Promise<void> {
    const e = this.expectFence(ref, true);
    const j = this.byId.get(ref.jobId)!;
    const outcome = outcomeFor(kind, this.step);
    const before = await this.jobAndOutbox(ref.jobId);
    const res = await this.ledger.settle({ ...ref, outcome });
    this.log(`settle ${holder ?? 'stale'} ${ref.jobId}@${ref.attempt} ${kind} -> ${res.accepted ? res.transition : res.reason}`);
    if (holder !== null) this.drop(holder, ref);
    if (e.ok) {
      assert.equal(res.accepted, true, `settle of live lease ${ref.jobId}@${ref.attempt} should be accepted, got ${JSON.stringify(res)}`);
      assert.ok(res.accepted);
      assert.equal(res.transition, this.expectTransition(j, outcome), `settle ${kind} transition`);
      this.applySettle(j, res.transition, res.job);
      return;
    }
    assert.equal(res.accepted, false, `settle of ${ref.jobId}@${ref.attempt} should be refused (${e.reasons.join('|')}), got ${JSON.stringify(res)}`);
    assert.ok(!res.accepted && e.reasons.includes(res.reason), `settle refused as ${JSON.stringify(res)}, expected ${e.reasons.join('|')}`);
    assert.deepEqual(await this.jobAndOutbox(ref.jobId), before, 'a refused settle changes nothing');
  }

  async settleRace(ref: LeaseRef, holder: string): Promise<void> {
    const e = this.expectFence(ref, true);
    const j = this.byId.get(ref.jobId)!;
    const outcomes = [outcomeFor('finished', this.step), outcomeFor('permanent', this.step)];
    const results = await Promise.all(outcomes.map((outcome) => this.ledger.settle({ ...ref, outcome })));
    this.log(`settleRace ${ref.jobId}@${ref.attempt} -> ${results.map((r) => (r.accepted ? r.transition : r.reason)).join(',')}`);
    this.drop(holder, ref);
    const winners = results.filter((r): r is Extract<SettleResult, { accepted: true }> => r.accepted);
    if (!e.ok) {
      assert.equal(winners.length, 0, `racing settles of ${ref.jobId}@${ref.attempt} should all be refused (${e.reasons.join('|')})`);
      return;
    }
    assert.equal(winners.length, 1, `exactly one of two racing settles wins, got ${JSON.stringify(results)}`);
    const winner = winners[0]!;
    const outcome = outcomes[results.indexOf(winner)]!;
    assert.equal(winner.transition, this.expectTransition(j, outcome));
    this.applySettle(j, winner.transition, winner.job);
  }

  /** A lease some worker holds, counted from the most recently granted. */
  pickHeld(n: number): { worker: string; ref: LeaseRef } | undefined {
    const all = [...this.holds].flatMap(([worker, refs]) => refs.map((ref) => ({ worker, ref })));
    all.sort((a, b) => this.refs.findIndex((r) => r.ref === a.ref) - this.refs.findIndex((r) => r.ref === b.ref));
    return pickFromEnd(all, n);
  }

  /**
   * A delivered work message: mostly one no worker has tried yet (a first delivery), else any
   * (a redelivery, a duplicate or a stale message).
   */
  async pickMessage(n: number, redelivery: boolean): Promise<WorkMessage | undefined> {
    if (this.pool.length === 0) await this.relay(false);
    const untried = this.pool.filter((m) => !this.tried.has(m));
    const msg = redelivery || untried.length === 0 ? pickFromEnd(this.pool, n) : untried[n % untried.length];
    if (msg) this.tried.add(msg);
    return msg;
  }

  /** Counts a terminal transition: a job ends once. */
  ended(j: ModelJob): void {
    j.endings += 1;
    assert.equal(j.endings, 1, `job ${j.id} ended twice`);
  }

  drop(worker: string, ref: LeaseRef): void {
    this.holds.set(
      worker,
      this.holds.get(worker)!.filter((r) => r !== ref),
    );
  }

  async cancel(j: ModelJob, tenantMode: 'own' | 'none' | 'other'): Promise<void> {
    const tenant = tenantMode === 'own' ? j.tenant : tenantMode === 'other' ? TENANTS.find((t) => t !== j.tenant)! : undefined;
    const before = await this.jobAndOutbox(j.id);
    const res = await this.ledger.cancel(tenant === undefined ? { jobId: j.id } : { jobId: j.id, tenant });
    this.log(`cancel ${j.id} as ${tenant ?? '(admin)'} -> ${res.outcome}${res.outcome === 'refused' ? ` ${res.reason}` : ''}`);
    if (tenantMode === 'other') {
      assert.deepEqual(res.outcome === 'refused' && res.reason, 'unknown_job', `another tenant's cancel: ${JSON.stringify(res)}`);
    } else if (isTerminal(j.state)) {
      assert.deepEqual(res.outcome === 'refused' && res.reason, 'ended', `cancel of an ended job: ${JSON.stringify(res)}`);
    } else if (j.state === 'queued') {
      assert.equal(res.outcome, 'cancelled', `cancel of a queued job: ${JSON.stringify(res)}`);
      j.state = 'failed';
      j.failureReason = 'cancelled';
      this.ended(j);
      return;
    } else {
      assert.equal(res.outcome, 'cancel_requested', `cancel of a running job: ${JSON.stringify(res)}`);
      assert.ok(res.outcome === 'cancel_requested');
      assert.equal(res.job.state, 'running');
      assert.equal(res.job.cancelRequested, true);
      j.cancelRequested = true;
      return;
    }
    assert.deepEqual(await this.jobAndOutbox(j.id), before, 'a refused cancel changes nothing');
  }

  async reject(j: ModelJob): Promise<void> {
    const before = await this.jobAndOutbox(j.id);
    const res = await this.ledger.reject({ jobId: j.id, error: errors.unroutable });
    this.log(`reject ${j.id} -> ${res.rejected ? 'rejected' : res.reason}`);
    if (j.state === 'queued') {
      assert.equal(res.rejected, true, `reject of a queued job: ${JSON.stringify(res)}`);
      j.state = 'failed';
      j.failureReason = 'unroutable';
      this.ended(j);
      return;
    }
    assert.deepEqual(res, { rejected: false, reason: 'not_queued' });
    assert.deepEqual(await this.jobAndOutbox(j.id), before, 'a refused reject changes nothing');
  }

  /** A pass that does not sweep: nothing swept, and the releases held to the same rules (no lease past its deadline counts). */
  async releasePass(): Promise<void> {
    const now = this.now;
    const report = await this.ledger.dispatch({ fleetWindowMs: FLEET_WINDOW_MS, sweep: false });
    this.log(`releasePass -> ${report.released.length} released`);
    const swept = report.abandoned.length + report.requeued.length + report.exhausted.length + report.cancelled.length + report.redispatched.length;
    assert.equal(swept, 0, 'a pass without the sweep sweeps nothing');
    if (this.config.dispatch === 'fair') this.checkReleases(report.released, now, { waiting: report.waiting, slotsFull: report.slotsFull });
    else assert.deepEqual([report.released, report.waiting], [[], false], 'fifo: no release pass');
  }

  async sweep(): Promise<void> {
    const now = this.now;
    const abandoned = this.jobs.filter(
      (j) => j.state === 'running' && j.lease !== null && j.lease.abandonAt !== null && j.lease.abandonAt <= now && !j.cancelRequested,
    );
    const expired = this.jobs.filter((j) => j.state === 'running' && j.lease !== null && j.lease.deadline <= now && !abandoned.includes(j));
    const expect = { requeued: [] as ModelJob[], exhausted: [] as ModelJob[], cancelled: [] as ModelJob[] };
    for (const j of expired) {
      if (j.cancelRequested) expect.cancelled.push(j);
      else if (j.attempt < j.maxAttempts) expect.requeued.push(j);
      else expect.exhausted.push(j);
    }
    // Fair: the orchestrator's pass is the dispatcher's, which sweeps first and then releases work.
    const report =
      this.config.dispatch === 'fair'
        ? await this.ledger.dispatch({ fleetWindowMs: FLEET_WINDOW_MS })
        : { ...(await this.ledger.sweep()), released: [], waiting: false, slotsFull: false };
    this.log(
      `sweep -> ${report.abandoned.length} abandoned, ${report.requeued.length} requeued, ${report.exhausted.length} exhausted, ${report.cancelled.length} cancelled, ${report.redispatched.length} redispatched, ${report.released.length} released ${JSON.stringify(report)}`,
    );
    const sorted = (xs: string[]) => [...xs].sort();
    assert.deepEqual(sorted(report.abandoned.map((r) => `${r.jobId}@${r.attempt}`)), sorted(abandoned.map((j) => `${j.id}@${j.attempt}`)), 'sweep: abandoned');
    for (const j of abandoned) {
      // Back to queued at the same attempt, due as before; fifo: its work message again, due now.
      j.state = 'queued';
      j.lease = null;
      j.abandonedAttempt = j.attempt;
      j.workDueAt = now;
      j.released = this.config.dispatch === 'fifo' ? j.attempt : 0;
    }
    assert.deepEqual(sorted(report.requeued.map((r) => r.jobId)), sorted(expect.requeued.map((j) => j.id)), 'sweep: requeued');
    assert.deepEqual(sorted(report.exhausted), sorted(expect.exhausted.map((j) => j.id)), 'sweep: exhausted');
    assert.deepEqual(sorted(report.cancelled), sorted(expect.cancelled.map((j) => j.id)), 'sweep: cancelled');
    for (const j of expect.requeued) {
      const deadline = j.lease!.deadline;
      const backoff = backoffFor(this.config, j.attempt);
      j.state = 'queued';
      j.attempt += 1;
      j.lease = null;
      const job = await this.ledger.getJob(j.id);
      assert.ok(job);
      assert.ok(
        job.notBefore >= deadline + backoff && job.notBefore <= now + backoff,
        `requeued ${j.id}: notBefore ${job.notBefore} outside [deadline + backoff, now + backoff] = [${deadline + backoff}, ${now + backoff}]`,
      );
      j.notBefore = job.notBefore;
      j.workDueAt = job.notBefore;
      if (this.config.dispatch === 'fifo') j.released = j.attempt;
    }
    for (const j of expect.exhausted) {
      j.state = 'failed';
      j.failureReason = 'exhausted';
      j.lease = null;
      this.ended(j);
    }
    for (const j of expect.cancelled) {
      j.state = 'failed';
      j.failureReason = 'cancelled';
      j.lease = null;
      this.ended(j);
    }
    assert.equal(new Set(report.redispatched).size, report.redispatched.length, 'a job is redispatched at most once per pass');
    for (const id of report.redispatched) {
      const j = this.byId.get(id);
      assert.ok(j, `redispatched an unknown job ${id}`);
      assert.equal(j.state, 'queued', `redispatched ${id}, which is ${j.state}`);
      assert.ok(j.notBefore <= now, `redispatched ${id} before its notBefore`);
      assert.ok(now - j.workDueAt >= this.config.redispatchAfterMs, `redispatched ${id} ${now - j.workDueAt} ms after its work message was due`);
      assert.equal(j.released, j.attempt, `redispatched ${id}, whose attempt ${j.attempt} was never released`);
      j.workDueAt = now;
    }
    if (this.config.dispatch === 'fair') this.checkReleases(report.released, now, { waiting: report.waiting, slotsFull: report.slotsFull });
  }

  /**
   * Fair: a dispatch pass releases only queued, due jobs not released for their attempt, at
   * most the free slots of their type (live leases and released, unleased work hold one
   * each; slots a grant outside the dispatcher took are not the pass's doing), and leaves
   * none of a type waiting while the type has a free slot: nothing limits these runs.
   */
  checkReleases(
    released: ReadonlyArray<{ jobId: string; attempt: number; type: string }>,
    now: number,
    left: Pick<DispatchReport, 'waiting' | 'slotsFull'>,
  ): void {
    assert.equal(new Set(released.map((r) => r.jobId)).size, released.length, 'a job is released at most once per pass');
    for (const r of released) {
      const j = this.byId.get(r.jobId);
      assert.ok(j, `released an unknown job ${r.jobId}`);
      assert.equal(j.state, 'queued', `released ${r.jobId}, which is ${j.state}`);
      assert.equal(r.attempt, j.attempt, `released ${r.jobId}@${r.attempt}, the job is at ${j.attempt}`);
      assert.ok(j.notBefore <= now, `released ${r.jobId} before its notBefore`);
      assert.notEqual(j.released, j.attempt, `released ${r.jobId}@${j.attempt} twice`);
      j.released = j.attempt;
      j.workDueAt = now;
    }
    let stillWaiting = 0;
    for (const type of TYPES) {
      const ofType = this.jobs.filter((j) => j.type === type);
      const held = ofType.filter((j) => (j.state === 'running' && j.lease!.deadline > now) || (j.state === 'queued' && j.released === j.attempt)).length;
      if (released.some((r) => r.type === type)) assert.ok(held <= FLEET_SLOTS, `type ${type}: ${held} held after a pass released work, ${FLEET_SLOTS} slots`);
      const waiting = ofType.filter((j) => j.state === 'queued' && j.released !== j.attempt && j.notBefore <= now);
      stillWaiting += waiting.length;
      if (held < FLEET_SLOTS)
        assert.deepEqual(
          waiting.map((j) => j.id),
          [],
          `type ${type}: ${held} of ${FLEET_SLOTS} slots held, and due jobs left waiting`,
        );
    }
    // Nothing limits these runs: whatever still waits, waits for a slot.
    assert.deepEqual(left, { waiting: stillWaiting > 0, slotsFull: stillWaiting > 0 }, 'what the pass left waiting');
  }

  // ---- invariants --------------------------------------------------------------------------

  async checkInvariants(): Promise<void> {
    const counts: Record<JobState, number> = { queued: 0, running: 0, finished: 0, failed: 0 };
    for (const j of this.jobs) {
      counts[j.state] += 1;
      const job = await this.ledger.getJob(j.id);
      assert.ok(job, `job ${j.id} vanished`);
      if (j.ended) {
        assert.deepEqual(job, j.ended, `terminal job ${j.id} changed`);
        continue;
      }
      assert.equal(job.tenant, j.tenant);
      assert.equal(job.type, j.type);
      assert.equal(job.maxAttempts, j.maxAttempts);
      assert.equal(job.state, j.state, `job ${j.id}: state`);
      assert.equal(job.attempt, j.attempt, `job ${j.id}: attempt`);
      assert.ok(job.attempt >= j.lastSeenAttempt, `job ${j.id}: attempt went back from ${j.lastSeenAttempt} to ${job.attempt}`);
      assert.ok(job.attempt >= 1 && job.attempt <= job.maxAttempts, `job ${j.id}: attempt ${job.attempt} of ${job.maxAttempts}`);
      j.lastSeenAttempt = job.attempt;
      if (j.state === 'queued') {
        assert.equal(job.notBefore, j.notBefore, `job ${j.id}: notBefore`);
        assert.equal(job.cancelRequested, false);
      } else if (j.state === 'running') {
        assert.equal(job.leaseToken, j.lease!.token, `job ${j.id}: lease token`);
        assert.equal(job.leaseDeadline, j.lease!.deadline, `job ${j.id}: lease deadline`);
        assert.equal(job.leaseHolder, j.lease!.holder, `job ${j.id}: lease holder`);
        assert.equal(job.cancelRequested, j.cancelRequested, `job ${j.id}: cancelRequested`);
      } else {
        assert.equal(job.failureReason, j.state === 'failed' ? j.failureReason : null, `job ${j.id}: failure reason`);
        assert.notEqual(job.endedAt, null, `job ${j.id}: endedAt`);
        j.ended = job;
      }
    }
    assert.deepEqual(await this.ledger.countJobsByState(), counts, 'countJobsByState');

    // Every lease ever granted answers the fence as the model says; at most one is live per job.
    const live = new Map<string, number>();
    for (const { ref } of this.refs) {
      const e = this.expectFence(ref, false);
      const res = await this.ledger.checkLease(ref);
      this.assertFence(ref, e, res);
      if (res.live) live.set(ref.jobId, (live.get(ref.jobId) ?? 0) + 1);
    }
    for (const [jobId, n] of live) assert.ok(n <= 1, `job ${jobId} has ${n} live leases`);
  }

  // ---- the run ----------------------------------------------------------------------------

  async apply(op: Op): Promise<void> {
    const logged = this.trace.length;
    await this.applyOp(op);
    if (stats && this.trace.length === logged) stats.set(`(nothing to do for ${op.k})`, (stats.get(`(nothing to do for ${op.k})`) ?? 0) + 1);
  }

  async applyOp(op: Op): Promise<void> {
    switch (op.k) {
      case 'submit':
        return this.submit([op.s], false);
      case 'submitMany':
        return this.submit(op.items, true);
      case 'relay':
        await this.relay(op.lose);
        return;
      case 'grant': {
        const msg = await this.pickMessage(op.msg, op.redelivery);
        if (msg) await this.grant(WORKERS[op.w]!, msg, op.future);
        return;
      }
      case 'grantRace': {
        const msg = await this.pickMessage(op.msg, op.redelivery);
        if (msg) await this.grantRace(msg);
        return;
      }
      case 'forgedGrant': {
        const held = this.pickHeld(op.h);
        // Only a lease still live is forged: an abandoned grant's attempt is queued again, anyone's to take.
        if (held && this.byId.get(held.ref.jobId)?.lease?.token === held.ref.token) await this.forgedGrant(held.ref, held.worker, op.withProof);
        return;
      }
      case 'renew':
        return this.renew(WORKERS[op.w]!);
      case 'check': {
        const held = pickFromEnd(this.refs, op.ref);
        if (held) await this.check(op.forge ? forged(held.ref) : held.ref);
        return;
      }
      case 'progress': {
        const held = this.pickHeld(op.h);
        if (held) await this.progress(held.ref, op.fraction);
        return;
      }
      case 'staleProgress': {
        const held = pickFromEnd(this.refs, op.ref);
        if (held) await this.progress(op.forge ? forged(held.ref) : held.ref, op.fraction);
        return;
      }
      case 'settle': {
        const held = this.pickHeld(op.h);
        if (held) {
          await this.settle(held.ref, op.outcome, held.worker);
        } else {
          // Nobody holds a lease: a worker takes the next message instead, so the step counts.
          const msg = await this.pickMessage(op.h, false);
          if (msg) await this.grant(WORKERS[op.h % WORKERS.length]!, msg, false);
        }
        return;
      }
      case 'staleSettle': {
        const held = pickFromEnd(this.refs, op.ref);
        if (held) await this.settle(op.forge ? forged(held.ref) : held.ref, op.outcome, null);
        return;
      }
      case 'settleRace': {
        const held = this.pickHeld(op.h);
        if (held) await this.settleRace(held.ref, held.worker);
        return;
      }
      case 'release': {
        if (op.stale) {
          const any = pickFromEnd(this.refs, op.ref);
          if (any) await this.release(op.forge ? forged(any.ref) : any.ref, null);
          return;
        }
        const held = this.pickHeld(op.ref);
        if (held) await this.release(op.forge ? forged(held.ref) : held.ref, op.forge ? null : held.worker);
        return;
      }
      case 'cancel': {
        const among =
          op.among === 'running'
            ? this.jobs.filter((x) => x.state === 'running')
            : op.among === 'open'
              ? this.jobs.filter((x) => !isTerminal(x.state))
              : this.jobs;
        const j = pickFromEnd(among, op.job);
        if (j) await this.cancel(j, op.tenant);
        return;
      }
      case 'reject': {
        const j = pickFromEnd(this.jobs, op.job);
        if (j) await this.reject(j);
        return;
      }
      case 'sweep':
        return this.sweep();
      case 'releasePass':
        return this.releasePass();
      case 'advance':
        this.clock.advance(op.ms);
        this.log(`advance ${op.ms}`);
        return;
      case 'advanceTo': {
        const times =
          op.target === 'deadline'
            ? this.jobs.flatMap((j) => (j.state === 'running' && j.lease ? [j.lease.deadline] : []))
            : this.jobs.flatMap((j) => (j.state === 'queued' ? [j.notBefore] : []));
        const at = pickFromEnd(
          times.filter((t) => t + op.delta > this.now),
          op.pick,
        );
        if (at !== undefined) {
          this.clock.set(at + op.delta);
          this.log(`advanceTo ${op.target}${op.delta >= 0 ? '+' : ''}${op.delta}`);
        }
        return;
      }
      case 'crash':
        this.holds.set(WORKERS[op.w]!, []);
        this.log(`crash ${WORKERS[op.w]}`);
        return;
    }
  }

  /**
   * The operations stopped: move time past every deadline, backoff and redispatch period,
   * sweep, relay, and let a healthy worker grant every work message and finish it at once,
   * until every job has ended. Then exactly one result row per job.
   */
  async drainToEnd(): Promise<void> {
    const c = this.config;
    const stride = Math.max(c.leaseTtlMs, c.redispatchAfterMs, c.backoffMaxMs) + 1;
    for (let round = 0; round < 12 && this.jobs.some((j) => !isTerminal(j.state)); round++) {
      this.step += 1;
      this.clock.advance(stride);
      this.log(`drain round ${round}: advance ${stride}`);
      // Fair: a pass releases a round per free slot; finishing it frees the slots for the next, at the same moment.
      for (let pass = 0; pass < 100; pass++) {
        await this.sweep();
        const delivered = await this.relay(false);
        if (delivered.length === 0) break;
        for (const msg of delivered) {
          if (!(await this.grant('finisher', msg, false))) continue;
          const ref = this.holds.get('finisher')!.at(-1)!;
          await this.settle(ref, 'finished', 'finisher');
        }
      }
      await this.checkInvariants();
    }
    const open = this.jobs.filter((j) => !isTerminal(j.state));
    assert.deepEqual(
      open.map((j) => `${j.id}: ${j.state}@${j.attempt}`),
      [],
      'after the operations stop, time, sweeps and a healthy worker end every job',
    );
    this.step += 1;
    await this.relay(false);
    await this.checkInvariants();
    for (const j of this.jobs) assert.equal(j.resultRows, 1, `job ${j.id} (${j.state}) has ${j.resultRows} result rows, expected exactly 1`);
    assert.deepEqual(await this.ledger.outboxStats(), { unsent: 0, oldestCreatedAt: null }, 'the outbox is empty at the end');
    // listJobs pages cover every job exactly once.
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let pages = 0; pages < 100; pages++) {
      const page = await this.ledger.listJobs(cursor === undefined ? { limit: 4 } : { limit: 4, cursor });
      seen.push(...page.jobs.map((job) => job.id));
      if (page.nextCursor === null) break;
      cursor = page.nextCursor;
    }
    assert.deepEqual([...seen].sort(), this.jobs.map((j) => j.id).sort(), 'listJobs pages list every job exactly once');
  }
}
