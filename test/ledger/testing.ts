/**
 * Helpers shared by the ledger conformance suite (conformance/) and the ledger property
 * test (property/). A driver's own test file only needs `LedgerFactory`:
 *
 *   ledgerConformance('sqlite', ({ clock, config }) => openSqliteLedger({ path, clock, config }));
 *
 * Everything here works through the Ledger interface alone, so it serves every driver.
 */
import assert from 'node:assert/strict';

import { ManualClock, type Clock } from '../../src/core/clock.js';
import type { SerializedError } from '../../src/core/errors.js';
import { LedgerError, type LedgerErrorCode } from '../../src/ledger/errors.js';
import {
  defaultLedgerConfig,
  type GrantLeaseResult,
  type Job,
  type Ledger,
  type LedgerConfig,
  type LeaseRef,
  type OutboxMessage,
  type ResultMessage,
  type SettleOutcome,
  type SettleResult,
  type SubmitParams,
  type WorkMessage,
} from '../../src/ledger/ledger.js';

/**
 * Opens a fresh, empty ledger driven by `clock`. Each call must return a ledger that shares
 * nothing with the ledgers of earlier calls; `close()` must release it (a driver's test file
 * may remove its temporary database there or in an `after` hook).
 */
export type LedgerFactory = (opts: { clock: Clock; config?: Partial<LedgerConfig> }) => Promise<Ledger>;

/**
 * The configuration every conformance test passes explicitly unless it tests the defaults,
 * so the suite does not move when the shipped defaults do.
 */
export const testConfig: LedgerConfig = {
  leaseTtlMs: 90_000,
  backoffBaseMs: 2_000,
  backoffMaxMs: 300_000,
  defaultMaxAttempts: 3,
  redispatchAfterMs: 300_000,
  // The suites below grant and then move the clock without renewing; abandon.ts tests the grant window.
  grantWindowMs: null,
  // The suites below test the ledger's edges with the work message written at submit and requeue; dispatch.ts tests fair mode.
  dispatch: 'fifo',
};

export interface LedgerHarness {
  ledger: Ledger;
  clock: ManualClock;
  config: LedgerConfig;
}

/** Opens a ledger on a ManualClock, runs `body`, and always closes the ledger. */
export async function withLedger<T>(factory: LedgerFactory, config: Partial<LedgerConfig> | undefined, body: (h: LedgerHarness) => Promise<T>): Promise<T> {
  const clock = new ManualClock();
  const ledger = await factory(config === undefined ? { clock } : { clock, config });
  try {
    return await body({ ledger, clock, config: { ...defaultLedgerConfig, ...config } });
  } finally {
    await ledger.close();
  }
}

export const errors = {
  permanent: { class: 'permanent', code: 'bad_plan', message: 'the plan names a filter that does not exist' },
  transient: { class: 'transient', code: 'storage_unavailable', message: 'storage answered 503' },
  fatal: { class: 'fatal', code: 'gpu_locked', message: 'the GPU stopped answering' },
  unroutable: { class: 'permanent', code: 'no_capable_worker', message: 'no worker offers capability gpu' },
} as const satisfies Record<string, SerializedError>;

export const finished = (data: unknown = { frames: 240 }): SettleOutcome => ({
  kind: 'finished',
  result: { data, outputs: { video: 'file:///outputs/job/1/video.mp4' } },
});
export const failed = (error: SerializedError): SettleOutcome => ({ kind: 'failed', error });

let keyCounter = 0;
/** An idempotency key no other call in this process has used. */
export function freshKey(prefix = 'key'): string {
  keyCounter += 1;
  return `${prefix}-${keyCounter}`;
}

export function submitParams(overrides: Partial<SubmitParams> = {}): SubmitParams {
  return {
    tenant: 'acme',
    type: 'transcode',
    input: { source: 's3://bucket/in.mov', preset: '1080p' },
    requires: ['ffmpeg'],
    ...overrides,
  };
}

export async function submitJob(ledger: Ledger, overrides: Partial<SubmitParams> = {}): Promise<Job> {
  const res = await ledger.submit(submitParams(overrides));
  assert.equal(res.created, true, 'a fresh submission creates a job');
  return res.job;
}

export interface Granted {
  job: Job;
  ref: LeaseRef;
  deadline: number;
}

/** Asserts that a grant succeeded and returns it narrowed. */
export function expectGranted(res: GrantLeaseResult, what = 'the grant'): Extract<GrantLeaseResult, { granted: true }> {
  assert.equal(res.granted, true, `${what} should be granted, got ${JSON.stringify(res)}`);
  return res;
}

export function expectGrantRefused(res: GrantLeaseResult, reason: string, what = 'the grant'): void {
  assert.equal(res.granted, false, `${what} should be refused (${reason}), got ${JSON.stringify(res)}`);
  assert.equal((res as { reason: string }).reason, reason, `${what}: refusal reason`);
}

/** Grants the lease of `jobId`'s current attempt to `worker`. */
/** The holder proof the test helpers grant with: one per worker name, as one worker process would send. */
export function proofOf(worker: string): string {
  return `proof-of-${worker}`;
}

export async function grant(ledger: Ledger, jobId: string, worker = 'worker-a'): Promise<Granted> {
  const job = await ledger.getJob(jobId);
  assert.ok(job, `job ${jobId} exists`);
  const res = expectGranted(await ledger.grantLease({ jobId, attempt: job.attempt, worker, holderProof: proofOf(worker) }));
  return { job: res.job, ref: { jobId, attempt: job.attempt, token: res.token }, deadline: res.deadline };
}

/** Submits a job and grants attempt 1 to `worker`. */
export async function submitAndGrant(ledger: Ledger, overrides: Partial<SubmitParams> = {}, worker = 'worker-a'): Promise<Granted> {
  const job = await submitJob(ledger, overrides);
  return grant(ledger, job.id, worker);
}

export function expectAccepted(res: SettleResult, transition?: string): Extract<SettleResult, { accepted: true }> {
  assert.equal(res.accepted, true, `the settle should be accepted, got ${JSON.stringify(res)}`);
  const ok = res;
  if (transition !== undefined) assert.equal(ok.transition, transition, 'settle transition');
  return ok;
}

/** Settles a granted attempt and asserts that the ledger accepted it. */
export async function settleOk(ledger: Ledger, ref: LeaseRef, outcome: SettleOutcome, transition?: string): Promise<Extract<SettleResult, { accepted: true }>> {
  return expectAccepted(await ledger.settle({ ...ref, outcome }), transition);
}

/** Takes every due, unsent outbox row (oldest first) and marks them sent, like the relay. */
export async function drainOutbox(ledger: Ledger, batch = 1000): Promise<OutboxMessage[]> {
  const all: OutboxMessage[] = [];
  for (;;) {
    const rows = await ledger.outboxTake(batch);
    if (rows.length === 0) return all;
    all.push(...rows);
    await ledger.outboxMarkSent(rows.map((r) => r.id));
    if (rows.length < batch) return all;
  }
}

export type WorkRow = Extract<OutboxMessage, { kind: 'work' }>;
export type ResultRow = Extract<OutboxMessage, { kind: 'result' }>;

export function workRows(rows: readonly OutboxMessage[], jobId?: string): WorkRow[] {
  return rows.filter((r): r is WorkRow => r.kind === 'work' && (jobId === undefined || r.jobId === jobId));
}

export function resultRows(rows: readonly OutboxMessage[], jobId?: string): ResultRow[] {
  return rows.filter((r): r is ResultRow => r.kind === 'result' && (jobId === undefined || r.jobId === jobId));
}

export function workBody(job: Pick<Job, 'id' | 'tenant' | 'type'>, attempt: number): WorkMessage {
  return { jobId: job.id, attempt, tenant: job.tenant, type: job.type };
}

/**
 * Asserts the fields of a result message that the contract fixes; `reason` is optional in
 * the message, but when present it must name the job's failure reason.
 */
export function assertResultBody(body: ResultMessage, job: Job): void {
  assert.equal(body.id, job.id, 'result message id is the job id');
  assert.equal(body.idempotencyKey, job.idempotencyKey, 'result message idempotencyKey');
  assert.equal(body.tenant, job.tenant, 'result message tenant');
  assert.equal(body.type, job.type, 'result message type');
  assert.equal(body.attempt, job.attempt, 'result message attempt');
  assert.ok(job.state === 'finished' || job.state === 'failed', `job ${job.id} is terminal`);
  assert.equal(body.state, job.state, 'result message state');
  if (job.state === 'finished') {
    assert.deepEqual(body.result, job.result, 'result message carries the result');
    assert.equal(body.error, undefined, 'a finished result message carries no error');
  } else {
    assert.deepEqual(body.error ?? null, job.error, 'result message carries the error (if the job has one)');
    if (body.reason !== undefined) assert.equal(body.reason, job.failureReason, 'result message reason');
  }
}

/** Asserts that `promise` rejects with a LedgerError of the given code. */
export async function expectLedgerError(promise: Promise<unknown>, code: LedgerErrorCode, what: string): Promise<void> {
  await assert.rejects(
    promise,
    (err: unknown) => {
      assert.ok(err instanceof LedgerError, `${what}: expected a LedgerError, got ${String(err)}`);
      assert.equal(err.code, code, `${what}: LedgerError code`);
      return true;
    },
    `${what} should throw LedgerError(${code})`,
  );
}

export async function mustGetJob(ledger: Ledger, jobId: string): Promise<Job> {
  const job = await ledger.getJob(jobId);
  assert.ok(job, `job ${jobId} should exist`);
  return job;
}

/** A view of the whole ledger, to show that an operation changed nothing. */
export async function snapshot(ledger: Ledger, jobIds: readonly string[]): Promise<unknown> {
  const jobs = [];
  for (const id of jobIds) jobs.push({ job: await ledger.getJob(id), attempts: await ledger.getAttempts(id) });
  return { jobs, outbox: await ledger.outboxStats(), counts: await ledger.countJobsByState() };
}
