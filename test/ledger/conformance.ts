/**
 * The ledger conformance suite: every transition and every refusal of the Ledger contract
 * (src/ledger/ledger.ts, and the edges drawn in docs/state-machine.md), stated through the
 * interface alone so that every driver runs the same suite:
 *
 *   ledgerConformance('sqlite', factory);
 *
 * Each test opens a fresh ledger from `factory` on a ManualClock; time only moves when a test
 * moves it, and nothing sleeps.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { LedgerError } from '../../src/ledger/errors.js';
import { type Job, type JobPage, type Ledger, type LedgerConfig, type LeaseRef, type ListJobsParams, type SubmitParams } from '../../src/ledger/ledger.js';
import {
  assertResultBody,
  drainOutbox,
  errors,
  expectGranted,
  expectGrantRefused,
  expectLedgerError,
  failed,
  finished,
  freshKey,
  grant,
  mustGetJob,
  proofOf,
  resultRows,
  settleOk,
  snapshot,
  submitAndGrant,
  submitJob,
  submitParams,
  testConfig,
  withLedger,
  workBody,
  workRows,
  type Granted,
  type LedgerFactory,
  type LedgerHarness,
} from './testing.js';

export type { LedgerFactory } from './testing.js';

const TTL = testConfig.leaseTtlMs;
const BASE = testConfig.backoffBaseMs;

/** Every job of a listing, following the cursor to the end. */
async function listAll(ledger: Ledger, params: ListJobsParams): Promise<Job[]> {
  const jobs: Job[] = [];
  let cursor: string | undefined;
  for (let pages = 0; pages < 1000; pages++) {
    const page: JobPage = await ledger.listJobs(cursor === undefined ? params : { ...params, cursor });
    jobs.push(...page.jobs);
    if (page.nextCursor === null) return jobs;
    cursor = page.nextCursor;
  }
  assert.fail('listJobs never ended its pages');
}

const ids = (jobs: readonly Job[]): string[] => jobs.map((j) => j.id).sort();

const emptySweep = { requeued: [], exhausted: [], cancelled: [], redispatched: [] };

export function ledgerConformance(name: string, factory: LedgerFactory): void {
  const run = <T>(body: (h: LedgerHarness) => Promise<T>, config: Partial<LedgerConfig> | undefined = testConfig) => withLedger(factory, config, body);

  /** Grants attempt 1, fails it transiently, waits out the backoff and grants attempt 2. */
  async function reachAttempt2(h: LedgerHarness, overrides: Partial<SubmitParams> = {}): Promise<{ first: Granted; second: Granted }> {
    const first = await submitAndGrant(h.ledger, overrides, 'worker-1');
    await settleOk(h.ledger, first.ref, failed(errors.transient), 'retry');
    h.clock.advance(BASE);
    const second = await grant(h.ledger, first.job.id, 'worker-2');
    assert.equal(second.ref.attempt, 2);
    return { first, second };
  }

  describe(`ledger conformance: ${name}`, () => {
    describe('submit', () => {
      it('submit creates queued@1 with no lease, notBefore = now and the submitted fields', () =>
        run(async ({ ledger, clock }) => {
          clock.advance(1234);
          const now = clock.now();
          const key = freshKey();
          const input = { source: 's3://in.mov', steps: [1, 2, { crop: 'none' }], note: null };
          const res = await ledger.submit({ tenant: 'acme', type: 'transcode', input, requires: ['ffmpeg', 'gpu'], idempotencyKey: key });
          assert.equal(res.created, true);
          const job = res.job;
          assert.equal(typeof job.id, 'string');
          assert.ok(job.id.length > 0, 'the job has an id');
          assert.equal(job.tenant, 'acme');
          assert.equal(job.type, 'transcode');
          assert.deepEqual(job.input, input);
          assert.deepEqual(job.requires, ['ffmpeg', 'gpu']);
          assert.equal(job.idempotencyKey, key);
          assert.equal(job.state, 'queued');
          assert.equal(job.attempt, 1);
          assert.equal(job.maxAttempts, testConfig.defaultMaxAttempts);
          assert.equal(job.notBefore, now);
          assert.equal(job.leaseToken, null);
          assert.equal(job.leaseHolder, null);
          assert.equal(job.leaseDeadline, null);
          assert.equal(job.cancelRequested, false);
          assert.equal(job.progress, null);
          assert.equal(job.result, null);
          assert.equal(job.failureReason, null);
          assert.equal(job.error, null);
          assert.equal(job.createdAt, now);
          assert.equal(job.endedAt, null);
          assert.deepEqual(await ledger.getJob(job.id), job, 'getJob answers what submit returned');
          assert.deepEqual(await ledger.getAttempts(job.id), [], 'no attempt has started');
        }));

      it('submit without requires or idempotency key stores an empty list and a null key', () =>
        run(async ({ ledger }) => {
          const { job } = await ledger.submit({ tenant: 'acme', type: 'transcode', input: {} });
          assert.deepEqual(job.requires, []);
          assert.equal(job.idempotencyKey, null);
        }));

      it('submit takes maxAttempts from the submission, else from the config', () =>
        run(
          async ({ ledger }) => {
            assert.equal((await submitJob(ledger)).maxAttempts, 5);
            assert.equal((await submitJob(ledger, { maxAttempts: 1 })).maxAttempts, 1);
            assert.equal((await submitJob(ledger, { maxAttempts: 9 })).maxAttempts, 9);
          },
          { ...testConfig, defaultMaxAttempts: 5 },
        ));

      it('submit writes exactly one work outbox row {jobId, attempt 1, tenant, type}, due now', () =>
        run(async ({ ledger, clock }) => {
          clock.advance(500);
          const job = await submitJob(ledger);
          const rows = await drainOutbox(ledger);
          assert.equal(rows.length, 1, 'one outbox row');
          const [row] = rows;
          assert.ok(row);
          assert.equal(row.kind, 'work');
          assert.equal(row.jobId, job.id);
          assert.deepEqual(row.body, workBody(job, 1));
          assert.equal(row.availableAt, clock.now());
          assert.equal(row.createdAt, clock.now());
        }));

      it('a repeated idempotency key under the same tenant returns the same job unchanged, created:false, and no second work row', () =>
        run(async ({ ledger, clock }) => {
          const key = freshKey();
          const first = await ledger.submit(submitParams({ idempotencyKey: key, input: { v: 1 } }));
          clock.advance(5_000);
          const second = await ledger.submit(submitParams({ idempotencyKey: key, input: { v: 2 }, maxAttempts: 7 }));
          assert.equal(first.created, true);
          assert.equal(second.created, false);
          assert.deepEqual(second.job, first.job, 'the existing job, unchanged');
          assert.equal(workRows(await drainOutbox(ledger)).length, 1, 'one work row for both submissions');
          assert.deepEqual((await ledger.countJobsByState()).queued, 1);
        }));

      it('a repeated idempotency key returns the job as it is now, even after it finished, and dispatches nothing', () =>
        run(async ({ ledger }) => {
          const key = freshKey();
          const g = await submitAndGrant(ledger, { idempotencyKey: key });
          await settleOk(ledger, g.ref, finished());
          await drainOutbox(ledger);
          const again = await ledger.submit(submitParams({ idempotencyKey: key }));
          assert.equal(again.created, false);
          assert.equal(again.job.id, g.job.id);
          assert.equal(again.job.state, 'finished');
          assert.deepEqual(await drainOutbox(ledger), [], 'no new outbox row');
        }));

      it('the same idempotency key under another tenant is a different job', () =>
        run(async ({ ledger }) => {
          const key = freshKey();
          const a = await ledger.submit(submitParams({ tenant: 'acme', idempotencyKey: key }));
          const b = await ledger.submit(submitParams({ tenant: 'globex', idempotencyKey: key }));
          assert.equal(a.created, true);
          assert.equal(b.created, true);
          assert.notEqual(a.job.id, b.job.id);
          assert.equal(b.job.tenant, 'globex');
          const rows = workRows(await drainOutbox(ledger));
          assert.deepEqual(rows.map((r) => r.jobId).sort(), [a.job.id, b.job.id].sort());
        }));

      it('submissions without an idempotency key are always new jobs', () =>
        run(async ({ ledger }) => {
          const a = await submitJob(ledger);
          const b = await submitJob(ledger);
          assert.notEqual(a.id, b.id);
          assert.equal(workRows(await drainOutbox(ledger)).length, 2);
        }));

      it('submit rejects invalid input with LedgerError invalid_input and writes nothing', () =>
        run(async ({ ledger }) => {
          const circular: Record<string, unknown> = { a: 1 };
          circular.self = circular;
          const cases: Array<[string, SubmitParams]> = [
            ['an empty tenant', submitParams({ tenant: '' })],
            ['a missing tenant', submitParams({ tenant: undefined as unknown as string })],
            ['an empty type', submitParams({ type: '' })],
            ['maxAttempts 0', submitParams({ maxAttempts: 0 })],
            ['maxAttempts -1', submitParams({ maxAttempts: -1 })],
            ['maxAttempts 1.5', submitParams({ maxAttempts: 1.5 })],
            ['maxAttempts NaN', submitParams({ maxAttempts: Number.NaN })],
            ['an input holding a BigInt', submitParams({ input: { frames: 10n } })],
            ['a circular input', submitParams({ input: circular })],
            ['requires as a string', submitParams({ requires: 'gpu' as unknown as string[] })],
            ['requires holding a number', submitParams({ requires: [1] as unknown as string[] })],
            ['requires holding null', submitParams({ requires: ['gpu', null] as unknown as string[] })],
          ];
          for (const [what, params] of cases) {
            await expectLedgerError(ledger.submit(params), 'invalid_input', `submit with ${what}`);
          }
          assert.deepEqual(await ledger.countJobsByState(), { queued: 0, running: 0, finished: 0, failed: 0 });
          assert.equal((await ledger.outboxStats()).unsent, 0, 'no outbox row');
        }));

      it('submitMany answers in order; a key repeated within the batch names the same job', () =>
        run(async ({ ledger }) => {
          const k1 = freshKey();
          const k2 = freshKey();
          const res = await ledger.submitMany([
            submitParams({ idempotencyKey: k1, type: 'a' }),
            submitParams({ type: 'b' }),
            submitParams({ idempotencyKey: k1, type: 'a' }),
            submitParams({ idempotencyKey: k2, type: 'c', tenant: 'globex' }),
          ]);
          assert.equal(res.length, 4);
          const [r0, r1, r2, r3] = res;
          assert.ok(r0 && r1 && r2 && r3);
          assert.deepEqual(
            res.map((r) => [r.created, r.job.type, r.job.tenant]),
            [
              [true, 'a', 'acme'],
              [true, 'b', 'acme'],
              [false, 'a', 'acme'],
              [true, 'c', 'globex'],
            ],
          );
          assert.equal(r2.job.id, r0.job.id, 'the repeated key names the first job');
          assert.equal(new Set(res.map((r) => r.job.id)).size, 3);
          for (const r of [r0, r1, r3]) assert.deepEqual(await ledger.getJob(r.job.id), r.job);
          const rows = workRows(await drainOutbox(ledger));
          assert.deepEqual(rows.map((r) => r.jobId).sort(), [r0.job.id, r1.job.id, r3.job.id].sort(), 'one work row per new job');
          for (const r of rows) assert.equal(r.body.attempt, 1);
        }));

      it('submitMany returns an existing job for a known key, created:false, with no new row', () =>
        run(async ({ ledger }) => {
          const key = freshKey();
          const existing = await submitJob(ledger, { idempotencyKey: key });
          await drainOutbox(ledger);
          const [res] = await ledger.submitMany([submitParams({ idempotencyKey: key })]);
          assert.ok(res);
          assert.equal(res.created, false);
          assert.deepEqual(res.job, existing);
          assert.deepEqual(await drainOutbox(ledger), []);
        }));

      it('submitMany with one invalid submission throws invalid_input and writes none of the batch', () =>
        run(async ({ ledger }) => {
          await expectLedgerError(
            ledger.submitMany([submitParams({ idempotencyKey: freshKey() }), submitParams({ type: '' }), submitParams()]),
            'invalid_input',
            'submitMany with an empty type in the middle',
          );
          assert.deepEqual(await ledger.countJobsByState(), { queued: 0, running: 0, finished: 0, failed: 0 });
          assert.equal((await ledger.outboxStats()).unsent, 0);
        }));

      it('submitMany of nothing answers nothing', () =>
        run(async ({ ledger }) => {
          assert.deepEqual(await ledger.submitMany([]), []);
        }));
    });

    describe('grantLease', () => {
      it('grant moves queued@1 to running@1 with a fresh token, deadline now + leaseTtlMs, the worker as holder and an attempt record', () =>
        run(async ({ ledger, clock }) => {
          const job = await submitJob(ledger);
          clock.advance(1_000);
          const now = clock.now();
          const res = expectGranted(await ledger.grantLease({ jobId: job.id, attempt: 1, worker: 'w1' }));
          assert.equal(typeof res.token, 'string');
          assert.ok(res.token.length > 0);
          assert.equal(res.deadline, now + TTL);
          assert.equal(res.job.state, 'running');
          assert.equal(res.job.attempt, 1);
          assert.equal(res.job.leaseToken, res.token);
          assert.equal(res.job.leaseHolder, 'w1');
          assert.equal(res.job.leaseDeadline, now + TTL);
          assert.deepEqual(await ledger.getJob(job.id), res.job);
          assert.deepEqual(await ledger.getAttempts(job.id), [
            { jobId: job.id, attempt: 1, worker: 'w1', startedAt: now, endedAt: null, outcome: null, error: null },
          ]);
        }));

      it('grant refuses an unknown job with unknown_job', () =>
        run(async ({ ledger }) => {
          expectGrantRefused(await ledger.grantLease({ jobId: 'no-such-job', attempt: 1, worker: 'w1' }), 'unknown_job');
        }));

      it('grant refuses a message for another attempt with other_attempt and changes nothing', () =>
        run(async (h) => {
          const { ledger } = h;
          const job = await submitJob(ledger);
          const before = await snapshot(ledger, [job.id]);
          expectGrantRefused(await ledger.grantLease({ jobId: job.id, attempt: 2, worker: 'w1' }), 'other_attempt', 'a grant from the future');
          expectGrantRefused(await ledger.grantLease({ jobId: job.id, attempt: 0, worker: 'w1' }), 'other_attempt', 'a grant for attempt 0');
          assert.deepEqual(await snapshot(ledger, [job.id]), before);
          const g = await grant(ledger, job.id, 'w1');
          await settleOk(ledger, g.ref, failed(errors.transient), 'retry');
          h.clock.advance(BASE);
          expectGrantRefused(await ledger.grantLease({ jobId: job.id, attempt: 1, worker: 'w2' }), 'other_attempt', 'a stale attempt-1 message');
          assert.equal((await mustGetJob(ledger, job.id)).state, 'queued');
        }));

      it('a second grant for a running attempt is refused with already_running for another worker', () =>
        run(async ({ ledger }) => {
          const g = await submitAndGrant(ledger, {}, 'w1');
          const before = await snapshot(ledger, [g.job.id]);
          expectGrantRefused(await ledger.grantLease({ jobId: g.job.id, attempt: 1, worker: 'w2' }), 'already_running', 'another worker');
          assert.deepEqual(await snapshot(ledger, [g.job.id]), before, 'the holder keeps its lease');
        }));

      it('the holder asking again (its first answer was lost) gets the same lease back, renewed, and no second attempt record', () =>
        run(async ({ ledger, clock }) => {
          const g = await submitAndGrant(ledger, {}, 'w1');
          clock.advance(TTL / 2);
          const again = await ledger.grantLease({ jobId: g.job.id, attempt: 1, worker: 'w1', holderProof: proofOf('w1') });
          assert.ok(again.granted, 'granted again');
          assert.equal(again.token, g.ref.token);
          assert.equal(again.deadline, clock.now() + TTL);
          assert.equal((await ledger.getAttempts(g.job.id)).length, 1);
        }));

      it("the holder's name without its proof, or with another proof, is refused and learns nothing (a forged lease request)", () =>
        run(async ({ ledger, clock }) => {
          const g = await submitAndGrant(ledger, {}, 'w1');
          clock.advance(TTL / 2);
          const before = await snapshot(ledger, [g.job.id]);
          const forged = [
            await ledger.grantLease({ jobId: g.job.id, attempt: 1, worker: 'w1' }),
            await ledger.grantLease({ jobId: g.job.id, attempt: 1, worker: 'w1', holderProof: 'a-guess' }),
            await ledger.grantLease({ jobId: g.job.id, attempt: 1, worker: 'w2', holderProof: proofOf('w1') }),
          ];
          for (const res of forged) expectGrantRefused(res, 'already_running', 'not the holding process');
          assert.deepEqual(await snapshot(ledger, [g.job.id]), before, 'the holder keeps its lease and its deadline');
          await settleOk(ledger, g.ref, finished());
        }));

      it('the holder asking again after its lease expired, or after a cancel request, is refused', () =>
        run(async ({ ledger, clock }) => {
          const g = await submitAndGrant(ledger, {}, 'w1');
          clock.advance(TTL);
          expectGrantRefused(await ledger.grantLease({ jobId: g.job.id, attempt: 1, worker: 'w1', holderProof: proofOf('w1') }), 'already_running', 'expired');
          const h = await submitAndGrant(ledger, {}, 'w1');
          await ledger.cancel({ jobId: h.job.id });
          expectGrantRefused(
            await ledger.grantLease({ jobId: h.job.id, attempt: 1, worker: 'w1', holderProof: proofOf('w1') }),
            'already_running',
            'cancel requested',
          );
        }));

      it('a running attempt whose lease expired is still refused already_running until the sweeper moves it', () =>
        run(async ({ ledger, clock }) => {
          const g = await submitAndGrant(ledger, {}, 'w1');
          clock.advance(TTL + 1);
          expectGrantRefused(await ledger.grantLease({ jobId: g.job.id, attempt: 1, worker: 'w2' }), 'already_running');
        }));

      it('two workers racing for the same attempt: exactly one wins', () =>
        run(async ({ ledger }) => {
          const job = await submitJob(ledger);
          const workers = ['w1', 'w2', 'w3', 'w4', 'w5'];
          const results = await Promise.all(workers.map((worker) => ledger.grantLease({ jobId: job.id, attempt: 1, worker })));
          const winners = results.flatMap((r, i) => (r.granted ? [workers[i]] : []));
          assert.equal(winners.length, 1, `exactly one grant wins, got ${JSON.stringify(results)}`);
          for (const r of results) if (!r.granted) assert.equal(r.reason, 'already_running');
          assert.equal((await mustGetJob(ledger, job.id)).leaseHolder, winners[0]);
          assert.equal((await ledger.getAttempts(job.id)).length, 1, 'one attempt record');
        }));

      it('grant refuses a retry still in its backoff with not_due, and grants it once notBefore is reached', () =>
        run(async ({ ledger, clock }) => {
          const g = await submitAndGrant(ledger, {}, 'w1');
          await settleOk(ledger, g.ref, failed(errors.transient), 'retry');
          const job = await mustGetJob(ledger, g.job.id);
          assert.equal(job.notBefore, clock.now() + BASE);
          expectGrantRefused(await ledger.grantLease({ jobId: job.id, attempt: 2, worker: 'w2' }), 'not_due', 'right after the retry');
          clock.advance(BASE - 1);
          expectGrantRefused(await ledger.grantLease({ jobId: job.id, attempt: 2, worker: 'w2' }), 'not_due', '1 ms before notBefore');
          assert.equal((await mustGetJob(ledger, job.id)).state, 'queued');
          clock.advance(1);
          const second = expectGranted(await ledger.grantLease({ jobId: job.id, attempt: 2, worker: 'w2' }));
          assert.equal(second.job.attempt, 2);
          assert.equal(second.deadline, clock.now() + TTL);
        }));

      it('grant refuses a finished or failed job with ended', () =>
        run(async ({ ledger }) => {
          const a = await submitAndGrant(ledger);
          await settleOk(ledger, a.ref, finished());
          expectGrantRefused(await ledger.grantLease({ jobId: a.job.id, attempt: 1, worker: 'w2' }), 'ended', 'a finished job');
          const b = await submitAndGrant(ledger);
          await settleOk(ledger, b.ref, failed(errors.permanent));
          expectGrantRefused(await ledger.grantLease({ jobId: b.job.id, attempt: 1, worker: 'w2' }), 'ended', 'a failed job');
          const c = await submitJob(ledger);
          await ledger.cancel({ jobId: c.id });
          expectGrantRefused(await ledger.grantLease({ jobId: c.id, attempt: 1, worker: 'w2' }), 'ended', 'a cancelled job');
        }));

      it('every grant gets a fresh token', () =>
        run(async (h) => {
          const { first, second } = await reachAttempt2(h);
          const other = await submitAndGrant(h.ledger);
          assert.equal(new Set([first.ref.token, second.ref.token, other.ref.token]).size, 3);
        }));
    });

    describe('renewLeases', () => {
      it('renew extends every live lease of the worker to now + leaseTtlMs in one call', () =>
        run(async ({ ledger, clock }) => {
          const a = await submitAndGrant(ledger, {}, 'w1');
          const b = await submitAndGrant(ledger, {}, 'w1');
          clock.advance(TTL - 1);
          const res = await ledger.renewLeases({ worker: 'w1', leases: [a.ref, b.ref] });
          assert.deepEqual(res.lost, []);
          const deadline = clock.now() + TTL;
          assert.deepEqual(
            [...res.renewed].sort((x, y) => x.jobId.localeCompare(y.jobId)),
            [
              { jobId: a.job.id, attempt: 1, deadline },
              { jobId: b.job.id, attempt: 1, deadline },
            ].sort((x, y) => x.jobId.localeCompare(y.jobId)),
          );
          assert.equal((await mustGetJob(ledger, a.job.id)).leaseDeadline, deadline);
          clock.advance(TTL - 1);
          assert.deepEqual(await ledger.checkLease(a.ref), { live: true, deadline }, 'the renewed lease outlives its first deadline');
        }));

      it('renew reports an unknown job as lost: unknown_job', () =>
        run(async ({ ledger }) => {
          const res = await ledger.renewLeases({ worker: 'w1', leases: [{ jobId: 'no-such-job', attempt: 1, token: 't' }] });
          assert.deepEqual(res, { renewed: [], lost: [{ jobId: 'no-such-job', attempt: 1, reason: 'unknown_job' }] });
        }));

      it('renew with a wrong token is lost as superseded and leaves the holder’s deadline alone', () =>
        run(async ({ ledger, clock }) => {
          const g = await submitAndGrant(ledger, {}, 'w1');
          clock.advance(1_000);
          const res = await ledger.renewLeases({ worker: 'w2', leases: [{ ...g.ref, token: `${g.ref.token}-forged` }] });
          assert.deepEqual(res, { renewed: [], lost: [{ jobId: g.job.id, attempt: 1, reason: 'superseded' }] });
          assert.equal((await mustGetJob(ledger, g.job.id)).leaseDeadline, g.deadline);
        }));

      it('renew of an earlier attempt is lost as superseded and does not touch the current attempt', () =>
        run(async (h) => {
          const { first, second } = await reachAttempt2(h);
          const res = await h.ledger.renewLeases({ worker: 'worker-1', leases: [first.ref] });
          assert.deepEqual(res, { renewed: [], lost: [{ jobId: first.job.id, attempt: 1, reason: 'superseded' }] });
          const job = await mustGetJob(h.ledger, first.job.id);
          assert.equal(job.leaseToken, second.ref.token);
          assert.equal(job.leaseDeadline, second.deadline);
        }));

      it('a lease at its deadline is lost as expired, even before the sweeper runs, and is not extended', () =>
        run(async ({ ledger, clock }) => {
          const g = await submitAndGrant(ledger, {}, 'w1');
          clock.advance(TTL);
          const res = await ledger.renewLeases({ worker: 'w1', leases: [g.ref] });
          assert.deepEqual(res, { renewed: [], lost: [{ jobId: g.job.id, attempt: 1, reason: 'expired' }] });
          const job = await mustGetJob(ledger, g.job.id);
          assert.equal(job.state, 'running');
          assert.equal(job.leaseDeadline, g.deadline, 'an expired lease is not resurrected');
        }));

      it('renew of an ended job is lost as ended', () =>
        run(async ({ ledger }) => {
          const g = await submitAndGrant(ledger, {}, 'w1');
          await settleOk(ledger, g.ref, finished());
          const res = await ledger.renewLeases({ worker: 'w1', leases: [g.ref] });
          assert.deepEqual(res, { renewed: [], lost: [{ jobId: g.job.id, attempt: 1, reason: 'ended' }] });
        }));

      it('renew of a cancel-requested lease is lost as cancelled and the lease is not extended', () =>
        run(async ({ ledger, clock }) => {
          const g = await submitAndGrant(ledger, {}, 'w1');
          assert.equal((await ledger.cancel({ jobId: g.job.id, tenant: 'acme' })).outcome, 'cancel_requested');
          clock.advance(1_000);
          const res = await ledger.renewLeases({ worker: 'w1', leases: [g.ref] });
          assert.deepEqual(res, { renewed: [], lost: [{ jobId: g.job.id, attempt: 1, reason: 'cancelled' }] });
          assert.equal((await mustGetJob(ledger, g.job.id)).leaseDeadline, g.deadline);
        }));

      it('one renewal answers renewed and lost leases together', () =>
        run(async ({ ledger, clock }) => {
          const live = await submitAndGrant(ledger, {}, 'w1');
          const ended = await submitAndGrant(ledger, {}, 'w1');
          await settleOk(ledger, ended.ref, finished());
          clock.advance(10);
          const res = await ledger.renewLeases({
            worker: 'w1',
            leases: [ended.ref, live.ref, { jobId: 'no-such-job', attempt: 3, token: 'x' }],
          });
          assert.deepEqual(res.renewed, [{ jobId: live.job.id, attempt: 1, deadline: clock.now() + TTL }]);
          assert.deepEqual(
            [...res.lost].sort((x, y) => x.reason.localeCompare(y.reason)),
            [
              { jobId: ended.job.id, attempt: 1, reason: 'ended' },
              { jobId: 'no-such-job', attempt: 3, reason: 'unknown_job' },
            ],
          );
        }));
    });

    describe('checkLease (the fence)', () => {
      it('checkLease of a live lease answers live with its deadline, and expired from the deadline on', () =>
        run(async ({ ledger, clock }) => {
          const g = await submitAndGrant(ledger);
          assert.deepEqual(await ledger.checkLease(g.ref), { live: true, deadline: g.deadline });
          clock.advance(TTL - 1);
          assert.deepEqual(await ledger.checkLease(g.ref), { live: true, deadline: g.deadline }, '1 ms before the deadline');
          clock.advance(1);
          assert.deepEqual(await ledger.checkLease(g.ref), { live: false, reason: 'expired' }, 'at the deadline');
        }));

      it('checkLease answers unknown_job for an unknown job', () =>
        run(async ({ ledger }) => {
          assert.deepEqual(await ledger.checkLease({ jobId: 'no-such-job', attempt: 1, token: 't' }), {
            live: false,
            reason: 'unknown_job',
          });
        }));

      it('checkLease answers superseded for a wrong token and for an earlier attempt', () =>
        run(async (h) => {
          const { first, second } = await reachAttempt2(h);
          assert.deepEqual(await h.ledger.checkLease(first.ref), { live: false, reason: 'superseded' }, 'attempt 1 after attempt 2 was granted');
          assert.deepEqual(await h.ledger.checkLease({ ...second.ref, token: 'forged' }), { live: false, reason: 'superseded' }, 'a wrong token');
          assert.deepEqual(await h.ledger.checkLease(second.ref), { live: true, deadline: second.deadline });
        }));

      it('checkLease answers superseded for an attempt that was retried but not yet re-granted', () =>
        run(async ({ ledger }) => {
          const g = await submitAndGrant(ledger);
          await settleOk(ledger, g.ref, failed(errors.transient), 'retry');
          assert.deepEqual(await ledger.checkLease(g.ref), { live: false, reason: 'superseded' });
        }));

      it('checkLease answers ended once the job ended', () =>
        run(async ({ ledger }) => {
          const g = await submitAndGrant(ledger);
          await settleOk(ledger, g.ref, failed(errors.permanent));
          assert.deepEqual(await ledger.checkLease(g.ref), { live: false, reason: 'ended' });
        }));

      it('checkLease answers cancelled once cancellation was requested', () =>
        run(async ({ ledger }) => {
          const g = await submitAndGrant(ledger);
          await ledger.cancel({ jobId: g.job.id });
          assert.deepEqual(await ledger.checkLease(g.ref), { live: false, reason: 'cancelled' });
        }));
    });

    describe('recordProgress', () => {
      it('accepted progress is stored on the job', () =>
        run(async ({ ledger }) => {
          const g = await submitAndGrant(ledger);
          assert.deepEqual(await ledger.recordProgress({ ...g.ref, fraction: 0.25, message: 'encoding' }), { accepted: true });
          let job = await mustGetJob(ledger, g.job.id);
          assert.equal(job.progress, 0.25);
          assert.equal(job.progressMessage, 'encoding');
          assert.deepEqual(await ledger.recordProgress({ ...g.ref, fraction: 0.5, message: 'muxing' }), { accepted: true });
          job = await mustGetJob(ledger, g.job.id);
          assert.equal(job.progress, 0.5);
          assert.equal(job.progressMessage, 'muxing');
        }));

      it('progress from a stale attempt is refused as superseded and changes nothing', () =>
        run(async (h) => {
          const { first, second } = await reachAttempt2(h);
          assert.deepEqual(await h.ledger.recordProgress({ ...second.ref, fraction: 0.1, message: 'attempt 2' }), { accepted: true });
          const before = await snapshot(h.ledger, [first.job.id]);
          assert.deepEqual(await h.ledger.recordProgress({ ...first.ref, fraction: 0.9, message: 'attempt 1' }), {
            accepted: false,
            reason: 'superseded',
          });
          assert.deepEqual(await snapshot(h.ledger, [first.job.id]), before);
          assert.equal((await mustGetJob(h.ledger, first.job.id)).progress, 0.1);
        }));

      it('progress with a wrong token is refused as superseded', () =>
        run(async ({ ledger }) => {
          const g = await submitAndGrant(ledger);
          assert.deepEqual(await ledger.recordProgress({ ...g.ref, token: 'forged', fraction: 0.5 }), { accepted: false, reason: 'superseded' });
          assert.equal((await mustGetJob(ledger, g.job.id)).progress, null);
        }));

      it('progress after the lease deadline is refused as expired and changes nothing', () =>
        run(async ({ ledger, clock }) => {
          const g = await submitAndGrant(ledger);
          clock.advance(TTL);
          const before = await snapshot(ledger, [g.job.id]);
          assert.deepEqual(await ledger.recordProgress({ ...g.ref, fraction: 0.5 }), { accepted: false, reason: 'expired' });
          assert.deepEqual(await snapshot(ledger, [g.job.id]), before);
        }));

      it('progress of a cancel-requested job is refused as cancelled', () =>
        run(async ({ ledger }) => {
          const g = await submitAndGrant(ledger);
          await ledger.cancel({ jobId: g.job.id });
          assert.deepEqual(await ledger.recordProgress({ ...g.ref, fraction: 0.5 }), { accepted: false, reason: 'cancelled' });
          assert.equal((await mustGetJob(ledger, g.job.id)).progress, null);
        }));

      it('progress of an ended job is refused as ended, of an unknown job as unknown_job', () =>
        run(async ({ ledger }) => {
          const g = await submitAndGrant(ledger);
          await settleOk(ledger, g.ref, finished());
          assert.deepEqual(await ledger.recordProgress({ ...g.ref, fraction: 0.5 }), { accepted: false, reason: 'ended' });
          assert.deepEqual(await ledger.recordProgress({ jobId: 'no-such-job', attempt: 1, token: 't', fraction: 0.5 }), {
            accepted: false,
            reason: 'unknown_job',
          });
        }));
    });

    describe('settle', () => {
      it('a finished settle stores the result, ends the job and writes one result row', () =>
        run(async ({ ledger, clock }) => {
          const key = freshKey();
          const g = await submitAndGrant(ledger, { idempotencyKey: key }, 'w1');
          await drainOutbox(ledger);
          clock.advance(10_000);
          const outcome = finished({ frames: 240 });
          const res = await settleOk(ledger, g.ref, outcome, 'finish');
          const job = res.job;
          assert.equal(job.state, 'finished');
          assert.equal(job.attempt, 1);
          assert.deepEqual(job.result, outcome.kind === 'finished' ? outcome.result : undefined);
          assert.equal(job.endedAt, clock.now());
          assert.equal(job.failureReason, null);
          assert.equal(job.error, null);
          assert.deepEqual(await ledger.getJob(g.job.id), job);
          const rows = await drainOutbox(ledger);
          assert.equal(rows.length, 1, 'exactly one outbox row');
          const [row] = resultRows(rows, g.job.id);
          assert.ok(row, 'a result row');
          assertResultBody(row.body, job);
          assert.equal(row.body.idempotencyKey, key);
          assert.equal(row.body.state, 'finished');
          assert.deepEqual(row.body.result, job.result);
          const [attempt] = await ledger.getAttempts(g.job.id);
          assert.ok(attempt);
          assert.equal(attempt.endedAt, clock.now());
          assert.equal(attempt.outcome, 'finished');
        }));

      it('a permanent error fails the job once with reason permanent and one result row', () =>
        run(async ({ ledger, clock }) => {
          const g = await submitAndGrant(ledger, { maxAttempts: 3 });
          await drainOutbox(ledger);
          clock.advance(1_000);
          const res = await settleOk(ledger, g.ref, failed(errors.permanent), 'fail_permanent');
          assert.equal(res.job.state, 'failed');
          assert.equal(res.job.failureReason, 'permanent');
          assert.deepEqual(res.job.error, errors.permanent);
          assert.equal(res.job.endedAt, clock.now());
          assert.equal(res.job.attempt, 1, 'no retry although attempts were left');
          assert.deepEqual(await ledger.getJob(g.job.id), res.job);
          const rows = await drainOutbox(ledger);
          assert.equal(rows.length, 1);
          const [row] = resultRows(rows);
          assert.ok(row);
          assertResultBody(row.body, res.job);
          assert.equal(row.body.state, 'failed');
          assert.deepEqual(row.body.error, errors.permanent);
          assert.deepEqual(
            (await ledger.getAttempts(g.job.id)).map((a) => [a.attempt, a.outcome, a.endedAt]),
            [[1, 'failed', clock.now()]],
          );
        }));

      it('a transient error with attempts left requeues at attempt n+1 after the backoff, with no result row', () =>
        run(async ({ ledger, clock }) => {
          const g = await submitAndGrant(ledger, { maxAttempts: 3 });
          await drainOutbox(ledger);
          clock.advance(1_000);
          const settledAt = clock.now();
          const res = await settleOk(ledger, g.ref, failed(errors.transient), 'retry');
          assert.equal(res.job.state, 'queued');
          assert.equal(res.job.attempt, 2);
          assert.equal(res.job.notBefore, settledAt + BASE);
          assert.equal(res.job.failureReason, null);
          assert.equal(res.job.endedAt, null);
          assert.deepEqual(await ledger.getJob(g.job.id), res.job);
          assert.deepEqual(
            (await ledger.getAttempts(g.job.id)).map((a) => [a.attempt, a.outcome, a.endedAt]),
            [[1, 'retried', settledAt]],
          );
          assert.deepEqual(await drainOutbox(ledger), [], 'no result row and no work row before notBefore');
        }));

      it('the work row for the retry becomes due exactly at notBefore', () =>
        run(async ({ ledger, clock }) => {
          const g = await submitAndGrant(ledger);
          await drainOutbox(ledger);
          const res = await settleOk(ledger, g.ref, failed(errors.transient), 'retry');
          clock.advance(BASE - 1);
          assert.deepEqual(await ledger.outboxTake(100), [], '1 ms before notBefore');
          clock.advance(1);
          const rows = await drainOutbox(ledger);
          assert.equal(rows.length, 1);
          const [row] = workRows(rows);
          assert.ok(row);
          assert.deepEqual(row.body, workBody(res.job, 2));
          assert.equal(row.availableAt, res.job.notBefore);
          expectGranted(await ledger.grantLease({ jobId: row.body.jobId, attempt: row.body.attempt, worker: 'w2' }));
        }));

      it('with the default config: lease TTL 90 s, 3 attempts, transient backoff 2 s, 4 s, 8 s', () =>
        run(async ({ ledger, clock }) => {
          assert.equal((await submitJob(ledger)).maxAttempts, 3);
          const job = await submitJob(ledger, { maxAttempts: 4 });
          const backoffs: number[] = [];
          for (let attempt = 1; attempt <= 3; attempt++) {
            const g = expectGranted(await ledger.grantLease({ jobId: job.id, attempt, worker: 'w1' }));
            assert.equal(g.deadline, clock.now() + 90_000);
            const res = await settleOk(ledger, { jobId: job.id, attempt, token: g.token }, failed(errors.transient), 'retry');
            backoffs.push(res.job.notBefore - clock.now());
            clock.set(res.job.notBefore);
          }
          assert.deepEqual(backoffs, [2_000, 4_000, 8_000]);
          const last = expectGranted(await ledger.grantLease({ jobId: job.id, attempt: 4, worker: 'w1' }));
          const res = await settleOk(ledger, { jobId: job.id, attempt: 4, token: last.token }, failed(errors.transient), 'exhaust');
          assert.equal(res.job.failureReason, 'exhausted');
        }, undefined));

      it('the backoff is capped at backoffMaxMs', () =>
        run(
          async ({ ledger, clock }) => {
            const job = await submitJob(ledger, { maxAttempts: 3 });
            const g1 = await grant(ledger, job.id);
            const r1 = await settleOk(ledger, g1.ref, failed(errors.transient), 'retry');
            assert.equal(r1.job.notBefore - clock.now(), 2_000);
            clock.set(r1.job.notBefore);
            const g2 = await grant(ledger, job.id);
            const r2 = await settleOk(ledger, g2.ref, failed(errors.transient), 'retry');
            assert.equal(r2.job.notBefore - clock.now(), 3_000, 'min(4 s, cap 3 s)');
          },
          { ...testConfig, backoffBaseMs: 2_000, backoffMaxMs: 3_000 },
        ));

      it('a transient error on the last attempt exhausts the job with the error and one result row', () =>
        run(async (h) => {
          const { ledger, clock } = h;
          const { first, second } = await reachAttempt2(h, { maxAttempts: 2 });
          await drainOutbox(ledger);
          clock.advance(500);
          const res = await settleOk(ledger, second.ref, failed(errors.transient), 'exhaust');
          assert.equal(res.job.state, 'failed');
          assert.equal(res.job.failureReason, 'exhausted');
          assert.deepEqual(res.job.error, errors.transient);
          assert.equal(res.job.attempt, 2);
          assert.equal(res.job.endedAt, clock.now());
          const rows = await drainOutbox(ledger);
          assert.equal(rows.length, 1, 'one result row and no work row');
          const [row] = resultRows(rows, first.job.id);
          assert.ok(row);
          assertResultBody(row.body, res.job);
          assert.deepEqual(
            (await ledger.getAttempts(first.job.id)).map((a) => [a.attempt, a.worker, a.outcome]),
            [
              [1, 'worker-1', 'retried'],
              [2, 'worker-2', 'failed'],
            ],
          );
        }));

      it('a transient error with maxAttempts 1 exhausts at once', () =>
        run(async ({ ledger }) => {
          const g = await submitAndGrant(ledger, { maxAttempts: 1 });
          const res = await settleOk(ledger, g.ref, failed(errors.transient), 'exhaust');
          assert.equal(res.job.failureReason, 'exhausted');
        }));

      it('a fatal error settles like a transient one: retry while attempts are left, then exhausted', () =>
        run(async ({ ledger, clock }) => {
          const g1 = await submitAndGrant(ledger, { maxAttempts: 2 });
          const r1 = await settleOk(ledger, g1.ref, failed(errors.fatal), 'retry');
          assert.equal(r1.job.state, 'queued');
          assert.equal(r1.job.attempt, 2);
          assert.equal(r1.job.notBefore, clock.now() + BASE);
          clock.advance(BASE);
          const g2 = await grant(ledger, g1.job.id, 'w2');
          const r2 = await settleOk(ledger, g2.ref, failed(errors.fatal), 'exhaust');
          assert.equal(r2.job.state, 'failed');
          assert.equal(r2.job.failureReason, 'exhausted');
          assert.deepEqual(r2.job.error, errors.fatal);
        }));

      it('after a cancel request, any failure (permanent, transient, fatal) ends the job as failed/cancelled', () =>
        run(async ({ ledger }) => {
          for (const error of [errors.permanent, errors.transient, errors.fatal]) {
            const g = await submitAndGrant(ledger, { maxAttempts: 3 });
            await drainOutbox(ledger);
            assert.equal((await ledger.cancel({ jobId: g.job.id, tenant: 'acme' })).outcome, 'cancel_requested');
            const res = await settleOk(ledger, g.ref, failed(error), 'cancel_running');
            assert.equal(res.job.state, 'failed', `${error.class}: state`);
            assert.equal(res.job.failureReason, 'cancelled', `${error.class}: reason`);
            assert.equal(res.job.attempt, 1, `${error.class}: not retried`);
            const rows = await drainOutbox(ledger);
            assert.equal(rows.length, 1, `${error.class}: one result row`);
            const [row] = resultRows(rows, g.job.id);
            assert.ok(row);
            assert.equal(row.body.state, 'failed');
            assert.deepEqual(
              (await ledger.getAttempts(g.job.id)).map((a) => a.outcome),
              ['cancelled'],
            );
          }
        }));

      it('after a cancel request, a finished result is still accepted as finished', () =>
        run(async ({ ledger }) => {
          const g = await submitAndGrant(ledger);
          await ledger.cancel({ jobId: g.job.id });
          const res = await settleOk(ledger, g.ref, finished(), 'finish');
          assert.equal(res.job.state, 'finished');
          assert.equal(resultRows(await drainOutbox(ledger), g.job.id).length, 1);
        }));

      it('a stale attempt loses the settle race: attempt 1 is refused as superseded once attempt 2 was granted, and nothing changes', () =>
        run(async ({ ledger, clock }) => {
          const g1 = await submitAndGrant(ledger, {}, 'w1');
          clock.advance(TTL);
          const report = await ledger.sweep();
          assert.deepEqual(
            report.requeued.map((r) => r.jobId),
            [g1.job.id],
          );
          clock.advance(BASE);
          const g2 = await grant(ledger, g1.job.id, 'w2');
          await drainOutbox(ledger);
          const before = await snapshot(ledger, [g1.job.id]);
          for (const outcome of [finished({ stale: true }), failed(errors.permanent), failed(errors.transient)]) {
            assert.deepEqual(await ledger.settle({ ...g1.ref, outcome }), { accepted: false, reason: 'superseded' }, outcome.kind);
          }
          assert.deepEqual(await snapshot(ledger, [g1.job.id]), before, 'the stale settle changed nothing');
          assert.deepEqual(await drainOutbox(ledger), [], 'the stale settle wrote no outbox row');
          const res = await settleOk(ledger, g2.ref, finished({ fresh: true }), 'finish');
          assert.deepEqual(res.job.result?.data, { fresh: true });
        }));

      it('a settle with a wrong token is refused as superseded and changes nothing', () =>
        run(async ({ ledger }) => {
          const g = await submitAndGrant(ledger);
          await drainOutbox(ledger);
          const before = await snapshot(ledger, [g.job.id]);
          assert.deepEqual(await ledger.settle({ ...g.ref, token: 'forged', outcome: finished() }), { accepted: false, reason: 'superseded' });
          assert.deepEqual(await snapshot(ledger, [g.job.id]), before);
          assert.deepEqual(await drainOutbox(ledger), []);
          await settleOk(ledger, g.ref, finished(), 'finish');
        }));

      it('a settle after the lease deadline is refused as expired, even before the sweeper runs, and changes nothing', () =>
        run(async ({ ledger, clock }) => {
          const g = await submitAndGrant(ledger);
          await drainOutbox(ledger);
          clock.advance(TTL);
          const before = await snapshot(ledger, [g.job.id]);
          for (const outcome of [finished(), failed(errors.permanent), failed(errors.transient)]) {
            assert.deepEqual(await ledger.settle({ ...g.ref, outcome }), { accepted: false, reason: 'expired' }, outcome.kind);
          }
          assert.deepEqual(await snapshot(ledger, [g.job.id]), before);
          assert.deepEqual(await drainOutbox(ledger), []);
          assert.deepEqual(
            (await ledger.sweep()).requeued.map((r) => r.jobId),
            [g.job.id],
            'the sweeper still requeues it',
          );
        }));

      it('a settle 1 ms before the lease deadline is accepted', () =>
        run(async ({ ledger, clock }) => {
          const g = await submitAndGrant(ledger);
          clock.advance(TTL - 1);
          await settleOk(ledger, g.ref, finished(), 'finish');
        }));

      it('a second settle of a settled attempt is refused and changes nothing', () =>
        run(async ({ ledger }) => {
          const g = await submitAndGrant(ledger);
          await settleOk(ledger, g.ref, finished({ n: 1 }), 'finish');
          const before = await snapshot(ledger, [g.job.id]);
          assert.deepEqual(await ledger.settle({ ...g.ref, outcome: finished({ n: 2 }) }), { accepted: false, reason: 'ended' });
          assert.deepEqual(await ledger.settle({ ...g.ref, outcome: failed(errors.permanent) }), { accepted: false, reason: 'ended' });
          assert.deepEqual(await snapshot(ledger, [g.job.id]), before);
          assert.equal(resultRows(await drainOutbox(ledger), g.job.id).length, 1, 'still one result row');
        }));

      it('a settle of an attempt that was already retried is refused as superseded and changes nothing', () =>
        run(async ({ ledger }) => {
          const g = await submitAndGrant(ledger);
          await settleOk(ledger, g.ref, failed(errors.transient), 'retry');
          const before = await snapshot(ledger, [g.job.id]);
          assert.deepEqual(await ledger.settle({ ...g.ref, outcome: finished() }), { accepted: false, reason: 'superseded' });
          assert.deepEqual(await ledger.settle({ ...g.ref, outcome: failed(errors.transient) }), { accepted: false, reason: 'superseded' });
          assert.deepEqual(await snapshot(ledger, [g.job.id]), before);
        }));

      it('concurrent settles of one attempt: exactly one wins and one result row is written', () =>
        run(async ({ ledger }) => {
          const g = await submitAndGrant(ledger);
          await drainOutbox(ledger);
          const outcomes = [finished({ by: 'a' }), finished({ by: 'b' }), failed(errors.permanent), failed(errors.transient)];
          const results = await Promise.all(outcomes.map((outcome) => ledger.settle({ ...g.ref, outcome })));
          const winners = results.filter((r) => r.accepted);
          assert.equal(winners.length, 1, `exactly one settle wins, got ${JSON.stringify(results.map((r) => r.accepted))}`);
          const [winner] = winners;
          assert.ok(winner && winner.accepted);
          for (const r of results) if (!r.accepted) assert.ok(['ended', 'superseded'].includes(r.reason), r.reason);
          assert.deepEqual(await ledger.getJob(g.job.id), winner.job);
          const rows = await drainOutbox(ledger);
          const expectedResultRows = winner.transition === 'retry' ? 0 : 1;
          assert.equal(resultRows(rows).length, expectedResultRows);
          assert.equal((await ledger.getAttempts(g.job.id)).filter((a) => a.endedAt !== null).length, 1);
        }));

      it('a settle for an unknown job is refused as unknown_job', () =>
        run(async ({ ledger }) => {
          assert.deepEqual(await ledger.settle({ jobId: 'no-such-job', attempt: 1, token: 't', outcome: finished() }), {
            accepted: false,
            reason: 'unknown_job',
          });
        }));
    });

    describe('release', () => {
      const gpuLocked = { class: 'fatal' as const, code: 'gpu_locked', message: 'the GPU does not answer' };

      it('a release with attempts left requeues at n+1 due at once, records the error on the attempt, and sends the work row now', () =>
        run(async ({ ledger, clock }) => {
          const g = await submitAndGrant(ledger, { maxAttempts: 3 });
          await drainOutbox(ledger);
          clock.advance(1_000);
          const res = await ledger.release({ ...g.ref, error: gpuLocked });
          assert.ok(res.accepted);
          assert.equal(res.transition, 'release');
          assert.equal(res.job.state, 'queued');
          assert.equal(res.job.attempt, 2);
          assert.equal(res.job.notBefore, clock.now(), 'no backoff');
          assert.equal(res.job.leaseToken, null);
          assert.equal(res.job.error, null, 'the job itself has not failed');
          assert.deepEqual(await ledger.getJob(g.job.id), res.job);
          assert.deepEqual(
            (await ledger.getAttempts(g.job.id)).map((a) => [a.attempt, a.outcome, a.endedAt, a.error]),
            [[1, 'released', clock.now(), gpuLocked]],
          );
          const rows = await drainOutbox(ledger);
          assert.deepEqual(
            rows.map((r) => r.kind),
            ['work'],
            'the work row is due now; no result row',
          );
          assert.deepEqual(workRows(rows)[0]!.body, workBody(res.job, 2));
          expectGranted(await ledger.grantLease({ jobId: g.job.id, attempt: 2, worker: 'w2' }), 'the next attempt, at once');
        }));

      it('a release on the last attempt fails the job as exhausted with the error and one result row', () =>
        run(async ({ ledger }) => {
          const g = await submitAndGrant(ledger, { maxAttempts: 1 });
          await drainOutbox(ledger);
          const res = await ledger.release({ ...g.ref, error: gpuLocked });
          assert.ok(res.accepted);
          assert.equal(res.transition, 'exhaust');
          assert.equal(res.job.state, 'failed');
          assert.equal(res.job.failureReason, 'exhausted');
          assert.deepEqual(res.job.error, gpuLocked);
          const rows = await drainOutbox(ledger);
          assert.equal(resultRows(rows, g.job.id).length, 1);
          assert.deepEqual(
            (await ledger.getAttempts(g.job.id)).map((a) => a.outcome),
            ['failed'],
          );
        }));

      it('a release after a cancel request ends the job as failed/cancelled', () =>
        run(async ({ ledger }) => {
          const g = await submitAndGrant(ledger, { maxAttempts: 3 });
          await ledger.cancel({ jobId: g.job.id });
          const res = await ledger.release({ ...g.ref, error: gpuLocked });
          assert.ok(res.accepted);
          assert.equal(res.transition, 'cancel_running');
          assert.equal(res.job.failureReason, 'cancelled');
        }));

      it('a released attempt is fenced: its renewal, fence, progress, settle and a second release are refused as superseded', () =>
        run(async ({ ledger }) => {
          const g = await submitAndGrant(ledger);
          assert.ok((await ledger.release({ ...g.ref, error: gpuLocked })).accepted);
          const before = await snapshot(ledger, [g.job.id]);
          assert.deepEqual(await ledger.release({ ...g.ref, error: gpuLocked }), { accepted: false, reason: 'superseded' });
          assert.deepEqual(await ledger.settle({ ...g.ref, outcome: finished() }), { accepted: false, reason: 'superseded' });
          assert.deepEqual(await ledger.checkLease(g.ref), { live: false, reason: 'superseded' });
          assert.deepEqual(await ledger.recordProgress({ ...g.ref, fraction: 0.5 }), { accepted: false, reason: 'superseded' });
          assert.deepEqual((await ledger.renewLeases({ worker: 'worker-a', leases: [g.ref] })).lost, [{ jobId: g.job.id, attempt: 1, reason: 'superseded' }]);
          assert.deepEqual(await snapshot(ledger, [g.job.id]), before);
        }));

      it('a release with a wrong token, after the deadline, of an ended or unknown job is refused and changes nothing', () =>
        run(async ({ ledger, clock }) => {
          const g = await submitAndGrant(ledger);
          const before = await snapshot(ledger, [g.job.id]);
          assert.deepEqual(await ledger.release({ ...g.ref, token: 'not-the-token', error: gpuLocked }), { accepted: false, reason: 'superseded' });
          assert.deepEqual(await ledger.release({ jobId: 'no-such-job', attempt: 1, token: 't', error: gpuLocked }), {
            accepted: false,
            reason: 'unknown_job',
          });
          clock.advance(TTL);
          assert.deepEqual(await ledger.release({ ...g.ref, error: gpuLocked }), { accepted: false, reason: 'expired' });
          assert.deepEqual(await snapshot(ledger, [g.job.id]), before);
          const h = await submitAndGrant(ledger);
          await settleOk(ledger, h.ref, finished(), 'finish');
          assert.deepEqual(await ledger.release({ ...h.ref, error: gpuLocked }), { accepted: false, reason: 'ended' });
        }));

      it('a release and a settle of one attempt racing: exactly one wins', () =>
        run(async ({ ledger }) => {
          const g = await submitAndGrant(ledger);
          const [released, settled] = await Promise.all([ledger.release({ ...g.ref, error: gpuLocked }), ledger.settle({ ...g.ref, outcome: finished() })]);
          assert.equal([released.accepted, settled.accepted].filter(Boolean).length, 1);
          assert.equal((await ledger.getAttempts(g.job.id)).filter((a) => a.endedAt !== null).length, 1);
        }));

      it('a release with a malformed error is invalid_input and changes nothing', () =>
        run(async ({ ledger }) => {
          const g = await submitAndGrant(ledger);
          const before = await snapshot(ledger, [g.job.id]);
          await expectLedgerError(ledger.release({ ...g.ref, error: { class: 'weird', code: 'x', message: 'm' } as never }), 'invalid_input', 'a bad class');
          await expectLedgerError(ledger.release({ ...g.ref, error: { ...gpuLocked, code: 'a\u0000b' } }), 'invalid_input', 'a NUL in the code');
          assert.deepEqual(await snapshot(ledger, [g.job.id]), before);
        }));
    });

    describe('cancel', () => {
      it('cancelling a queued job fails it at once as cancelled, with one result row', () =>
        run(async ({ ledger, clock }) => {
          const job = await submitJob(ledger);
          await drainOutbox(ledger);
          clock.advance(100);
          const res = await ledger.cancel({ jobId: job.id, tenant: 'acme' });
          assert.equal(res.outcome, 'cancelled');
          assert.ok(res.outcome === 'cancelled');
          assert.equal(res.job.state, 'failed');
          assert.equal(res.job.failureReason, 'cancelled');
          assert.equal(res.job.endedAt, clock.now());
          assert.deepEqual(await ledger.getJob(job.id), res.job);
          const rows = await drainOutbox(ledger);
          assert.equal(rows.length, 1);
          const [row] = resultRows(rows, job.id);
          assert.ok(row);
          assertResultBody(row.body, res.job);
          assert.equal(row.body.state, 'failed');
          expectGrantRefused(await ledger.grantLease({ jobId: job.id, attempt: 1, worker: 'w1' }), 'ended', 'its work message arriving late');
        }));

      it('cancelling a queued job that waits out a backoff fails it at once', () =>
        run(async ({ ledger }) => {
          const g = await submitAndGrant(ledger);
          await settleOk(ledger, g.ref, failed(errors.transient), 'retry');
          const res = await ledger.cancel({ jobId: g.job.id });
          assert.equal(res.outcome, 'cancelled');
          assert.equal((await mustGetJob(ledger, g.job.id)).failureReason, 'cancelled');
        }));

      it('cancelling a running job requests cancellation: it keeps running and its lease now answers cancelled', () =>
        run(async ({ ledger }) => {
          const g = await submitAndGrant(ledger, {}, 'w1');
          await drainOutbox(ledger);
          const res = await ledger.cancel({ jobId: g.job.id, tenant: 'acme' });
          assert.equal(res.outcome, 'cancel_requested');
          assert.ok(res.outcome === 'cancel_requested');
          assert.equal(res.job.state, 'running');
          assert.equal(res.job.cancelRequested, true);
          assert.equal(res.job.leaseToken, g.ref.token);
          assert.equal(res.job.leaseDeadline, g.deadline);
          assert.deepEqual(await ledger.getJob(g.job.id), res.job);
          assert.deepEqual(await drainOutbox(ledger), [], 'no result row yet');
          assert.deepEqual(await ledger.checkLease(g.ref), { live: false, reason: 'cancelled' });
          assert.deepEqual((await ledger.renewLeases({ worker: 'w1', leases: [g.ref] })).lost, [{ jobId: g.job.id, attempt: 1, reason: 'cancelled' }]);
          assert.deepEqual(await ledger.recordProgress({ ...g.ref, fraction: 0.3 }), { accepted: false, reason: 'cancelled' });
        }));

      it('cancelling a finished or failed job is refused as ended and changes nothing', () =>
        run(async ({ ledger }) => {
          const a = await submitAndGrant(ledger);
          await settleOk(ledger, a.ref, finished());
          const b = await submitJob(ledger);
          assert.equal((await ledger.cancel({ jobId: b.id })).outcome, 'cancelled');
          await drainOutbox(ledger);
          const before = await snapshot(ledger, [a.job.id, b.id]);
          for (const id of [a.job.id, b.id]) {
            const res = await ledger.cancel({ jobId: id, tenant: 'acme' });
            assert.equal(res.outcome, 'refused');
            assert.ok(res.outcome === 'refused');
            assert.equal(res.reason, 'ended');
          }
          assert.deepEqual(await snapshot(ledger, [a.job.id, b.id]), before);
          assert.deepEqual(await drainOutbox(ledger), []);
        }));

      it('cancelling an unknown job, or another tenant’s job, is refused as unknown_job and changes nothing', () =>
        run(async ({ ledger }) => {
          const queued = await submitJob(ledger, { tenant: 'acme' });
          const running = await submitAndGrant(ledger, { tenant: 'acme' });
          await drainOutbox(ledger);
          const before = await snapshot(ledger, [queued.id, running.job.id]);
          for (const params of [
            { jobId: 'no-such-job' },
            { jobId: 'no-such-job', tenant: 'acme' },
            { jobId: queued.id, tenant: 'globex' },
            { jobId: running.job.id, tenant: 'globex' },
          ]) {
            const res = await ledger.cancel(params);
            assert.equal(res.outcome, 'refused', JSON.stringify(params));
            assert.ok(res.outcome === 'refused');
            assert.equal(res.reason, 'unknown_job', JSON.stringify(params));
          }
          assert.deepEqual(await snapshot(ledger, [queued.id, running.job.id]), before);
          assert.deepEqual(await drainOutbox(ledger), []);
        }));
    });

    describe('reject', () => {
      it('reject fails a queued job as unroutable with the error and one result row', () =>
        run(async ({ ledger, clock }) => {
          const job = await submitJob(ledger, { requires: ['gpu'] });
          await drainOutbox(ledger);
          clock.advance(5);
          const res = await ledger.reject({ jobId: job.id, error: errors.unroutable });
          assert.equal(res.rejected, true);
          assert.ok(res.rejected);
          assert.equal(res.job.state, 'failed');
          assert.equal(res.job.failureReason, 'unroutable');
          assert.deepEqual(res.job.error, errors.unroutable);
          assert.equal(res.job.endedAt, clock.now());
          assert.deepEqual(await ledger.getJob(job.id), res.job);
          const rows = await drainOutbox(ledger);
          assert.equal(rows.length, 1);
          const [row] = resultRows(rows, job.id);
          assert.ok(row);
          assertResultBody(row.body, res.job);
          expectGrantRefused(await ledger.grantLease({ jobId: job.id, attempt: 1, worker: 'w1' }), 'ended');
        }));

      it('reject withdraws the work message not yet sent: only the failure message is left to publish', () =>
        run(async ({ ledger }) => {
          const job = await submitJob(ledger, { type: 'orphan1' });
          const res = await ledger.reject({ jobId: job.id, error: errors.unroutable });
          assert.ok(res.rejected);
          const rows = await drainOutbox(ledger);
          assert.deepEqual(
            rows.map((r) => r.kind),
            ['result'],
            'no work message for a rejected job',
          );
        }));

      it('reject refuses a running or ended job as not_queued, an unknown job as unknown_job, and changes nothing', () =>
        run(async ({ ledger }) => {
          const running = await submitAndGrant(ledger);
          const done = await submitAndGrant(ledger);
          await settleOk(ledger, done.ref, finished());
          await drainOutbox(ledger);
          const before = await snapshot(ledger, [running.job.id, done.job.id]);
          assert.deepEqual(await ledger.reject({ jobId: running.job.id, error: errors.unroutable }), { rejected: false, reason: 'not_queued' });
          assert.deepEqual(await ledger.reject({ jobId: done.job.id, error: errors.unroutable }), { rejected: false, reason: 'not_queued' });
          assert.deepEqual(await ledger.reject({ jobId: 'no-such-job', error: errors.unroutable }), { rejected: false, reason: 'unknown_job' });
          assert.deepEqual(await snapshot(ledger, [running.job.id, done.job.id]), before);
          assert.deepEqual(await drainOutbox(ledger), []);
        }));
    });

    describe('sweep', () => {
      it('sweep requeues an expired lease at attempt n+1 after the backoff and records the attempt as expired', () =>
        run(async ({ ledger, clock }) => {
          const g = await submitAndGrant(ledger, { maxAttempts: 3 }, 'w1');
          await drainOutbox(ledger);
          clock.advance(TTL);
          const report = await ledger.sweep();
          assert.deepEqual(
            report.requeued.map((r) => r.jobId),
            [g.job.id],
          );
          assert.deepEqual([report.exhausted, report.cancelled, report.redispatched], [[], [], []]);
          const job = await mustGetJob(ledger, g.job.id);
          assert.equal(job.state, 'queued');
          assert.equal(job.attempt, 2);
          assert.equal(job.notBefore, clock.now() + BASE);
          assert.deepEqual(
            (await ledger.getAttempts(g.job.id)).map((a) => [a.attempt, a.outcome, a.endedAt]),
            [[1, 'expired', clock.now()]],
          );
          assert.deepEqual(await drainOutbox(ledger), [], 'the next work row waits for the backoff');
          clock.advance(BASE);
          const rows = await drainOutbox(ledger);
          assert.deepEqual(
            workRows(rows).map((r) => r.body),
            [workBody(job, 2)],
          );
          assert.equal(rows.length, 1);
          expectGranted(await ledger.grantLease({ jobId: g.job.id, attempt: 2, worker: 'w2' }));
        }));

      it('sweep leaves a lease alone until its deadline', () =>
        run(async ({ ledger, clock }) => {
          const g = await submitAndGrant(ledger);
          await drainOutbox(ledger);
          clock.advance(TTL - 1);
          const before = await snapshot(ledger, [g.job.id]);
          assert.deepEqual(await ledger.sweep(), emptySweep);
          assert.deepEqual(await snapshot(ledger, [g.job.id]), before);
          assert.deepEqual(await ledger.checkLease(g.ref), { live: true, deadline: g.deadline });
        }));

      it('sweep fails an expired lease with no attempts left as exhausted, with one result row', () =>
        run(async ({ ledger, clock }) => {
          const g = await submitAndGrant(ledger, { maxAttempts: 1 });
          await drainOutbox(ledger);
          clock.advance(TTL);
          const report = await ledger.sweep();
          assert.deepEqual(report, { ...emptySweep, exhausted: [g.job.id] });
          const job = await mustGetJob(ledger, g.job.id);
          assert.equal(job.state, 'failed');
          assert.equal(job.failureReason, 'exhausted');
          assert.equal(job.endedAt, clock.now());
          const rows = await drainOutbox(ledger);
          assert.equal(rows.length, 1);
          const [row] = resultRows(rows, g.job.id);
          assert.ok(row);
          assertResultBody(row.body, job);
          const [attempt] = await ledger.getAttempts(g.job.id);
          assert.equal(attempt?.endedAt, clock.now());
        }));

      it('sweep fails an expired, cancel-requested lease as cancelled, with one result row', () =>
        run(async ({ ledger, clock }) => {
          const g = await submitAndGrant(ledger, { maxAttempts: 3 });
          await ledger.cancel({ jobId: g.job.id });
          await drainOutbox(ledger);
          clock.advance(TTL);
          const report = await ledger.sweep();
          assert.deepEqual(report, { ...emptySweep, cancelled: [g.job.id] });
          const job = await mustGetJob(ledger, g.job.id);
          assert.equal(job.state, 'failed');
          assert.equal(job.failureReason, 'cancelled');
          const rows = await drainOutbox(ledger);
          assert.equal(rows.length, 1);
          const [row] = resultRows(rows, g.job.id);
          assert.ok(row);
          assertResultBody(row.body, job);
        }));

      it('sweep re-dispatches a queued job whose work message went unleased for redispatchAfterMs, once per period', () =>
        run(
          async ({ ledger, clock }) => {
            const R = 60_000;
            const job = await submitJob(ledger);
            await drainOutbox(ledger);
            const t0 = clock.now();
            clock.set(t0 + R - 1);
            assert.deepEqual(await ledger.sweep(), emptySweep, 'not yet: 1 ms short of redispatchAfterMs');
            clock.set(t0 + R + 1);
            assert.deepEqual(await ledger.sweep(), { ...emptySweep, redispatched: [job.id] });
            const rows = await drainOutbox(ledger);
            assert.deepEqual(
              rows.map((r) => [r.kind, r.body]),
              [['work', workBody(job, 1)]],
            );
            assert.deepEqual(await ledger.sweep(), emptySweep, 'not twice in one period');
            clock.set(t0 + 2 * R);
            assert.deepEqual(await ledger.sweep(), emptySweep, 'the period restarts at the redispatch');
            clock.set(t0 + 2 * R + 2);
            assert.deepEqual(await ledger.sweep(), { ...emptySweep, redispatched: [job.id] }, 'again after another period');
            assert.equal(workRows(await drainOutbox(ledger), job.id).length, 1);
            expectGranted(await ledger.grantLease({ jobId: job.id, attempt: 1, worker: 'w1' }));
            clock.advance(10 * R);
            const after = await ledger.sweep();
            assert.deepEqual(after.redispatched, [], 'a leased job is not redispatched');
          },
          { ...testConfig, redispatchAfterMs: 60_000 },
        ));

      it('sweep with redispatchTypes sends work again only for those types; for the others the period restarts', () =>
        run(
          async ({ ledger, clock }) => {
            const R = 60_000;
            const render = await submitJob(ledger, { type: 'render' });
            const transcode = await submitJob(ledger, { type: 'transcode' });
            await drainOutbox(ledger);
            const t0 = clock.now();
            clock.set(t0 + R + 1);
            assert.deepEqual(await ledger.sweep({ redispatchTypes: ['render'] }), { ...emptySweep, redispatched: [render.id] });
            assert.deepEqual(
              (await drainOutbox(ledger)).map((r) => [r.kind, r.body]),
              [['work', workBody(render, 1)]],
              'only the render job got its work message again',
            );
            assert.deepEqual(await ledger.sweep(), emptySweep, "the transcode job's period restarted at that pass, though it was not sent");
            clock.set(t0 + 2 * R + 2);
            assert.deepEqual(await ledger.sweep({ redispatchTypes: [] }), emptySweep, 'no type: nothing is sent');
            assert.deepEqual(await drainOutbox(ledger), []);
            clock.set(t0 + 3 * R + 3);
            const report = await ledger.sweep({ redispatchTypes: ['transcode', 'render'] });
            assert.deepEqual([...report.redispatched].sort(), [render.id, transcode.id].sort());
          },
          { ...testConfig, redispatchAfterMs: 60_000 },
        ));

      it('a job waiting out its backoff is not redispatched; the period counts from notBefore', () =>
        run(
          async ({ ledger, clock }) => {
            const g = await submitAndGrant(ledger, { maxAttempts: 2 });
            await drainOutbox(ledger);
            const res = await settleOk(ledger, g.ref, failed(errors.transient), 'retry');
            assert.equal(res.job.notBefore, clock.now() + 100_000);
            clock.advance(50_000);
            assert.deepEqual((await ledger.sweep()).redispatched, [], 'in its backoff');
            clock.set(res.job.notBefore);
            // The relay sends the retry's work message as soon as it is due.
            assert.deepEqual(
              workRows(await drainOutbox(ledger), g.job.id).map((r) => r.body),
              [workBody(res.job, 2)],
            );
            clock.set(res.job.notBefore + 500);
            assert.deepEqual((await ledger.sweep()).redispatched, [], 'due for less than redispatchAfterMs');
            clock.set(res.job.notBefore + 1_001);
            assert.deepEqual((await ledger.sweep()).redispatched, [g.job.id], 'unleased for redispatchAfterMs since notBefore');
            const rows = await drainOutbox(ledger);
            assert.deepEqual(
              rows.map((r) => [r.kind, r.body]),
              [['work', workBody(res.job, 2)]],
            );
          },
          { ...testConfig, backoffBaseMs: 100_000, backoffMaxMs: 100_000, redispatchAfterMs: 1_000 },
        ));

      it('a sweep with nothing due reports nothing and changes nothing', () =>
        run(async ({ ledger, clock }) => {
          const queued = await submitJob(ledger);
          const running = await submitAndGrant(ledger);
          const done = await submitAndGrant(ledger);
          await settleOk(ledger, done.ref, finished());
          const backoff = await submitAndGrant(ledger);
          await settleOk(ledger, backoff.ref, failed(errors.transient), 'retry');
          await drainOutbox(ledger);
          clock.advance(1_000);
          const all = [queued.id, running.job.id, done.job.id, backoff.job.id];
          const before = await snapshot(ledger, all);
          assert.deepEqual(await ledger.sweep(), emptySweep);
          assert.deepEqual(await ledger.sweep(), emptySweep);
          assert.deepEqual(await snapshot(ledger, all), before);
          assert.deepEqual(await drainOutbox(ledger), []);
        }));

      it('one sweep pass takes every edge at once: leases of different attempts (each its own backoff), exhausted and cancelled', () =>
        run(async ({ ledger, clock }) => {
          const first = [await submitAndGrant(ledger, { maxAttempts: 3 }), await submitAndGrant(ledger, { maxAttempts: 3 })];
          // A job on its second attempt: its first attempt expired already.
          const second = await submitAndGrant(ledger, { maxAttempts: 3 });
          clock.advance(TTL);
          assert.deepEqual((await ledger.sweep()).requeued.map((r) => r.jobId).sort(), [...first, second].map((g) => g.job.id).sort());
          clock.advance(BASE);
          const regrants = await Promise.all(first.map((g) => ledger.grantLease({ jobId: g.job.id, attempt: 2, worker: 'w2' })));
          for (const regrant of regrants) expectGranted(regrant);
          const onSecond = await ledger.grantLease({ jobId: second.job.id, attempt: 2, worker: 'w2' });
          expectGranted(onSecond);
          const last = await submitAndGrant(ledger, { maxAttempts: 1 });
          const cancelled = await submitAndGrant(ledger, { maxAttempts: 3 });
          await ledger.cancel({ jobId: cancelled.job.id });
          const fresh = await submitAndGrant(ledger, { maxAttempts: 3 });
          await drainOutbox(ledger);
          clock.advance(TTL);
          const report = await ledger.sweep();
          assert.deepEqual(
            report.requeued.map((r) => [r.jobId, r.attempt]).sort(),
            [...first.map((g) => [g.job.id, 3]), [second.job.id, 3], [fresh.job.id, 2]].sort(),
          );
          assert.deepEqual([report.exhausted, report.cancelled], [[last.job.id], [cancelled.job.id]]);
          for (const g of [...first, second]) {
            const job = await mustGetJob(ledger, g.job.id);
            assert.deepEqual([job.state, job.attempt, job.notBefore], ['queued', 3, clock.now() + 2 * BASE], 'after attempt 2: twice the base backoff');
            assert.deepEqual(
              (await ledger.getAttempts(g.job.id)).map((a) => [a.attempt, a.outcome]),
              [
                [1, 'expired'],
                [2, 'expired'],
              ],
            );
          }
          const freshJob = await mustGetJob(ledger, fresh.job.id);
          assert.deepEqual([freshJob.state, freshJob.attempt, freshJob.notBefore], ['queued', 2, clock.now() + BASE]);
          assert.deepEqual(
            [(await mustGetJob(ledger, last.job.id)).failureReason, (await mustGetJob(ledger, cancelled.job.id)).failureReason],
            ['exhausted', 'cancelled'],
          );
          clock.advance(2 * BASE);
          const rows = await drainOutbox(ledger);
          const byJob = (a: { jobId: string }, b: { jobId: string }) => a.jobId.localeCompare(b.jobId);
          const expected = [...[...first, second].map((g) => workBody(g.job, 3)), workBody(fresh.job, 2)];
          assert.deepEqual(
            workRows(rows)
              .map((r) => r.body)
              .sort(byJob),
            expected.sort(byJob),
          );
          assert.equal(resultRows(rows, last.job.id).length + resultRows(rows, cancelled.job.id).length, 2);
        }));

      it('sweep handles at most `limit` expired leases per pass and the rest on the next', () =>
        run(async ({ ledger, clock }) => {
          const jobs = [await submitAndGrant(ledger), await submitAndGrant(ledger), await submitAndGrant(ledger)];
          clock.advance(TTL);
          const first = await ledger.sweep({ limit: 2 });
          assert.equal(first.requeued.length, 2);
          const second = await ledger.sweep({ limit: 2 });
          assert.equal(second.requeued.length, 1);
          assert.deepEqual([...first.requeued, ...second.requeued].map((r) => r.jobId).sort(), jobs.map((g) => g.job.id).sort());
          assert.deepEqual(await ledger.sweep({ limit: 2 }), emptySweep);
        }));
    });

    describe('outbox', () => {
      it('outboxTake returns due unsent rows oldest first, at most `limit`, and does not mark them sent', () =>
        run(async ({ ledger, clock }) => {
          const jobs: Job[] = [];
          for (let i = 0; i < 3; i++) {
            jobs.push(await submitJob(ledger));
            clock.advance(1);
          }
          const two = await ledger.outboxTake(2);
          assert.deepEqual(
            two.map((r) => r.jobId),
            [jobs[0]?.id, jobs[1]?.id],
          );
          const all = await ledger.outboxTake(10);
          assert.deepEqual(
            all.map((r) => r.jobId),
            jobs.map((j) => j.id),
            'untaken rows come back, in order',
          );
          assert.deepEqual(all.slice(0, 2), two, 'the same rows, same ids');
          assert.equal(new Set(all.map((r) => r.id)).size, 3);
        }));

      it('outboxMarkSent removes rows from later takes and from outboxStats', () =>
        run(async ({ ledger, clock }) => {
          const t0 = clock.now();
          const jobs: Job[] = [];
          for (let i = 0; i < 3; i++) {
            jobs.push(await submitJob(ledger));
            clock.advance(1);
          }
          assert.deepEqual(await ledger.outboxStats(), { unsent: 3, oldestCreatedAt: t0 });
          const rows = await ledger.outboxTake(10);
          await ledger.outboxMarkSent(rows.slice(0, 2).map((r) => r.id));
          assert.deepEqual(
            (await ledger.outboxTake(10)).map((r) => r.jobId),
            [jobs[2]?.id],
          );
          assert.deepEqual(await ledger.outboxStats(), { unsent: 1, oldestCreatedAt: t0 + 2 });
          await ledger.outboxMarkSent(rows.map((r) => r.id));
          assert.deepEqual(await ledger.outboxTake(10), []);
          assert.deepEqual(await ledger.outboxStats(), { unsent: 0, oldestCreatedAt: null });
        }));

      it('outboxSetAside fails the queued job of a work row as permanent/undeliverable, once, and its row leaves the outbox', () =>
        run(async ({ ledger, clock }) => {
          const bad = await submitJob(ledger);
          const good = await submitJob(ledger);
          const [badRow, goodRow] = await ledger.outboxTake(10);
          clock.advance(5);
          const { failedJobs } = await ledger.outboxSetAside([{ id: badRow!.id, reason: 'routing key longer than 255 bytes' }]);
          assert.deepEqual(
            failedJobs.map((j) => j.id),
            [bad.id],
          );
          const failed = await ledger.getJob(bad.id);
          assert.deepEqual(failedJobs[0], failed);
          assert.equal(failed?.state, 'failed');
          assert.equal(failed?.failureReason, 'permanent');
          assert.deepEqual(failed?.error, { class: 'permanent', code: 'undeliverable', message: 'routing key longer than 255 bytes' });
          assert.equal(failed?.endedAt, clock.now());
          assert.equal((await ledger.getJob(good.id))?.state, 'queued', 'the other job is untouched');
          const rows = await ledger.outboxTake(10);
          assert.deepEqual(
            rows.map((r) => [r.kind, r.jobId]),
            [
              ['work', good.id],
              ['result', bad.id],
            ],
            'the bad row is gone; its failure message follows',
          );
          assert.equal(rows[0]?.id, goodRow?.id);
          expectGrantRefused(await ledger.grantLease({ jobId: bad.id, attempt: 1, worker: 'w1' }), 'ended');
          // Again, or for a result row: the row leaves the outbox, no job changes.
          const result = rows[1]!;
          assert.deepEqual(
            await ledger.outboxSetAside([
              { id: badRow!.id, reason: 'again' },
              { id: result.id, reason: 'no' },
              { id: 987_654_321, reason: 'none' },
            ]),
            {
              failedJobs: [],
            },
          );
          assert.deepEqual(await ledger.getJob(bad.id), failed);
          assert.deepEqual(
            (await ledger.outboxTake(10)).map((r) => r.jobId),
            [good.id],
          );
          assert.deepEqual(await ledger.outboxStats(), { unsent: 1, oldestCreatedAt: goodRow!.createdAt });
        }));

      it('outboxSetAside of a work row for an attempt the job has left changes no job', () =>
        run(async ({ ledger }) => {
          const granted = await submitAndGrant(ledger);
          const [stale] = await ledger.outboxTake(10);
          assert.equal(stale?.jobId, granted.job.id);
          assert.deepEqual(await ledger.outboxSetAside([{ id: stale.id, reason: 'refused' }]), { failedJobs: [] });
          assert.equal((await ledger.getJob(granted.job.id))?.state, 'running');
        }));

      it('outboxMarkSent of already-sent or unknown ids is harmless', () =>
        run(async ({ ledger }) => {
          await submitJob(ledger);
          const rows = await drainOutbox(ledger);
          await ledger.outboxMarkSent(rows.map((r) => r.id));
          await ledger.outboxMarkSent([987_654_321]);
          await ledger.outboxMarkSent([]);
          assert.deepEqual(await ledger.outboxTake(10), []);
          const job = await submitJob(ledger);
          assert.deepEqual(
            (await drainOutbox(ledger)).map((r) => r.jobId),
            [job.id],
          );
        }));
    });

    describe('queries', () => {
      it('getJob scopes by tenant: another tenant sees undefined, an unknown id is undefined', () =>
        run(async ({ ledger }) => {
          const job = await submitJob(ledger, { tenant: 'acme' });
          assert.deepEqual(await ledger.getJob(job.id, 'acme'), job);
          assert.deepEqual(await ledger.getJob(job.id), job);
          assert.equal(await ledger.getJob(job.id, 'globex'), undefined);
          assert.equal(await ledger.getJob('no-such-job'), undefined);
          assert.equal(await ledger.getJob('no-such-job', 'acme'), undefined);
        }));

      it('getAttempts lists every attempt in order with worker, times and outcome', () =>
        run(async ({ ledger, clock }) => {
          const job = await submitJob(ledger, { maxAttempts: 3 });
          const t1 = clock.now();
          const g1 = await grant(ledger, job.id, 'w1');
          clock.advance(10);
          await settleOk(ledger, g1.ref, failed(errors.transient), 'retry');
          const e1 = clock.now();
          clock.advance(BASE);
          const t2 = clock.now();
          await grant(ledger, job.id, 'w2');
          clock.advance(TTL);
          const e2 = clock.now();
          await ledger.sweep();
          clock.advance(2 * BASE);
          const t3 = clock.now();
          const g3 = await grant(ledger, job.id, 'w3');
          clock.advance(7);
          await settleOk(ledger, g3.ref, finished(), 'finish');
          const e3 = clock.now();
          const attempts = await ledger.getAttempts(job.id);
          assert.deepEqual(
            attempts.map((a) => [a.jobId, a.attempt, a.worker, a.startedAt, a.endedAt, a.outcome]),
            [
              [job.id, 1, 'w1', t1, e1, 'retried'],
              [job.id, 2, 'w2', t2, e2, 'expired'],
              [job.id, 3, 'w3', t3, e3, 'finished'],
            ],
          );
          assert.deepEqual(await ledger.getAttempts('no-such-job'), []);
        }));

      it('listJobs filters by state, type and tenant', () =>
        run(async ({ ledger }) => {
          const queued = await submitJob(ledger, { tenant: 'acme', type: 'transcode' });
          const running = await submitAndGrant(ledger, { tenant: 'acme', type: 'render' });
          const done = await submitAndGrant(ledger, { tenant: 'acme', type: 'transcode' });
          await settleOk(ledger, done.ref, finished());
          const other = await submitJob(ledger, { tenant: 'globex', type: 'transcode' });
          assert.deepEqual(ids(await listAll(ledger, {})), ids([queued, running.job, done.job, other]));
          assert.deepEqual(ids(await listAll(ledger, { tenant: 'acme' })), ids([queued, running.job, done.job]));
          assert.deepEqual(ids(await listAll(ledger, { tenant: 'acme', state: 'queued' })), [queued.id]);
          assert.deepEqual(ids(await listAll(ledger, { state: 'running' })), [running.job.id]);
          assert.deepEqual(ids(await listAll(ledger, { state: 'finished' })), [done.job.id]);
          assert.deepEqual(ids(await listAll(ledger, { state: 'failed' })), []);
          assert.deepEqual(ids(await listAll(ledger, { type: 'transcode' })), ids([queued, done.job, other]));
          assert.deepEqual(ids(await listAll(ledger, { tenant: 'globex', type: 'transcode', state: 'queued' })), [other.id]);
          assert.deepEqual(ids(await listAll(ledger, { tenant: 'globex', type: 'render' })), []);
          const listed = await listAll(ledger, { tenant: 'acme', state: 'running' });
          assert.deepEqual(listed, [await mustGetJob(ledger, running.job.id)], 'listJobs returns whole jobs');
        }));

      it('listJobs pages with a cursor return every job exactly once', () =>
        run(async ({ ledger, clock }) => {
          const acme: string[] = [];
          const all: string[] = [];
          for (let i = 0; i < 7; i++) {
            const tenant = i % 3 === 2 ? 'globex' : 'acme';
            const job = await submitJob(ledger, { tenant });
            all.push(job.id);
            if (tenant === 'acme') acme.push(job.id);
            if (i % 2 === 0) clock.advance(1);
          }
          for (const [params, expected] of [
            [{ limit: 3 }, all],
            [{ limit: 1 }, all],
            [{ limit: 2, tenant: 'acme' }, acme],
          ] as const) {
            const seen: string[] = [];
            let cursor: string | undefined;
            let pages = 0;
            for (;;) {
              const page = await ledger.listJobs(cursor === undefined ? { ...params } : { ...params, cursor });
              pages++;
              assert.ok(page.jobs.length <= params.limit, 'a page holds at most `limit` jobs');
              seen.push(...page.jobs.map((j) => j.id));
              if (page.nextCursor === null) break;
              cursor = page.nextCursor;
              assert.ok(pages < 50, 'the pages end');
            }
            assert.equal(seen.length, expected.length, `every job exactly once with ${JSON.stringify(params)}`);
            assert.deepEqual([...seen].sort(), [...expected].sort());
            assert.ok(pages >= Math.ceil(expected.length / params.limit), 'the listing was paged');
          }
        }));

      it('countJobsByState counts every state, zeros included', () =>
        run(async ({ ledger }) => {
          assert.deepEqual(await ledger.countJobsByState(), { queued: 0, running: 0, finished: 0, failed: 0 });
          await submitJob(ledger);
          await submitJob(ledger);
          await submitAndGrant(ledger);
          const done = await submitAndGrant(ledger);
          await settleOk(ledger, done.ref, finished());
          const bad = await submitAndGrant(ledger);
          await settleOk(ledger, bad.ref, failed(errors.permanent));
          assert.deepEqual(await ledger.countJobsByState(), { queued: 2, running: 1, finished: 1, failed: 1 });
        }));
    });

    describe('terminal states never change', () => {
      type Ending = (h: LedgerHarness) => Promise<{ jobId: string; ref: LeaseRef | null }>;
      const endings: Array<[string, Ending]> = [
        [
          'finished',
          async ({ ledger }) => {
            const g = await submitAndGrant(ledger);
            await settleOk(ledger, g.ref, finished(), 'finish');
            return { jobId: g.job.id, ref: g.ref };
          },
        ],
        [
          'failed/permanent',
          async ({ ledger }) => {
            const g = await submitAndGrant(ledger);
            await settleOk(ledger, g.ref, failed(errors.permanent), 'fail_permanent');
            return { jobId: g.job.id, ref: g.ref };
          },
        ],
        [
          'failed/exhausted by settle',
          async ({ ledger }) => {
            const g = await submitAndGrant(ledger, { maxAttempts: 1 });
            await settleOk(ledger, g.ref, failed(errors.transient), 'exhaust');
            return { jobId: g.job.id, ref: g.ref };
          },
        ],
        [
          'failed/exhausted by an expired lease',
          async ({ ledger, clock }) => {
            const g = await submitAndGrant(ledger, { maxAttempts: 1 });
            clock.advance(TTL);
            assert.deepEqual((await ledger.sweep()).exhausted, [g.job.id]);
            return { jobId: g.job.id, ref: g.ref };
          },
        ],
        [
          'failed/cancelled while queued',
          async ({ ledger }) => {
            const job = await submitJob(ledger);
            assert.equal((await ledger.cancel({ jobId: job.id })).outcome, 'cancelled');
            return { jobId: job.id, ref: null };
          },
        ],
        [
          'failed/cancelled while running',
          async ({ ledger }) => {
            const g = await submitAndGrant(ledger);
            await ledger.cancel({ jobId: g.job.id });
            await settleOk(ledger, g.ref, failed(errors.transient), 'cancel_running');
            return { jobId: g.job.id, ref: g.ref };
          },
        ],
        [
          'failed/unroutable',
          async ({ ledger }) => {
            const job = await submitJob(ledger);
            assert.equal((await ledger.reject({ jobId: job.id, error: errors.unroutable })).rejected, true);
            return { jobId: job.id, ref: null };
          },
        ],
      ];

      for (const [label, end] of endings) {
        it(`a ${label} job refuses every operation and never changes`, () =>
          run(async (h) => {
            const { ledger, clock } = h;
            const { jobId, ref } = await end(h);
            await drainOutbox(ledger);
            const before = await snapshot(ledger, [jobId]);
            const job = await mustGetJob(ledger, jobId);
            const lease: LeaseRef = ref ?? { jobId, attempt: job.attempt, token: 'never-granted' };
            const endedReasons = ref ? ['ended'] : ['ended', 'superseded'];
            const attempts = [job.attempt, job.attempt + 1];
            for (const attempt of attempts) {
              const res = await ledger.grantLease({ jobId, attempt, worker: 'w9' });
              assert.equal(res.granted, false, `grant of attempt ${attempt}`);
            }
            expectGrantRefused(await ledger.grantLease({ jobId, attempt: job.attempt, worker: 'w9' }), 'ended');
            const renew = await ledger.renewLeases({ worker: 'w9', leases: [lease] });
            assert.deepEqual(renew.renewed, []);
            assert.equal(renew.lost.length, 1);
            assert.ok(endedReasons.includes(renew.lost[0]!.reason), `renew: ${renew.lost[0]!.reason}`);
            const check = await ledger.checkLease(lease);
            assert.equal(check.live, false);
            assert.ok(!check.live && endedReasons.includes(check.reason), `check: ${JSON.stringify(check)}`);
            const progress = await ledger.recordProgress({ ...lease, fraction: 0.9 });
            assert.ok(!progress.accepted && endedReasons.includes(progress.reason), `progress: ${JSON.stringify(progress)}`);
            for (const outcome of [finished({ late: true }), failed(errors.permanent), failed(errors.transient), failed(errors.fatal)]) {
              const res = await ledger.settle({ ...lease, outcome });
              assert.ok(!res.accepted && endedReasons.includes(res.reason), `settle: ${JSON.stringify(res)}`);
            }
            const cancel = await ledger.cancel({ jobId });
            assert.ok(cancel.outcome === 'refused' && cancel.reason === 'ended', `cancel: ${JSON.stringify(cancel)}`);
            assert.deepEqual(await ledger.reject({ jobId, error: errors.unroutable }), { rejected: false, reason: 'not_queued' });
            const again = await ledger.submit(submitParams({ idempotencyKey: freshKey() }));
            assert.notEqual(again.job.id, jobId);
            clock.advance(10 * TTL);
            const report = await ledger.sweep();
            const mentioned = [...report.requeued.map((r) => r.jobId), ...report.exhausted, ...report.cancelled, ...report.redispatched];
            assert.ok(!mentioned.includes(jobId), `the sweeper touched the ended job: ${JSON.stringify(report)}`);
            const after = await snapshot(ledger, [jobId]);
            assert.deepEqual((after as { jobs: unknown }).jobs, (before as { jobs: unknown }).jobs, 'the job and its attempts are unchanged');
            const rows = await drainOutbox(ledger);
            assert.deepEqual(
              rows.filter((r) => r.jobId === jobId),
              [],
              'no outbox row for the ended job',
            );
          }));
      }
    });

    describe('NUL characters (PostgreSQL cannot keep them in a text column, so no driver does)', () => {
      const NUL = '\u0000';
      const REPLACED = '\uFFFD';

      /** Asserts that `promise` rejects with LedgerError invalid_input whose message names `field`. */
      async function expectInvalidNaming(promise: Promise<unknown>, field: string, what: string): Promise<void> {
        await assert.rejects(
          promise,
          (err: unknown) => {
            assert.ok(err instanceof LedgerError, `${what}: expected a LedgerError, got ${String(err)}`);
            assert.equal(err.code, 'invalid_input', `${what}: LedgerError code`);
            assert.ok(err.message.includes(field), `${what}: "${err.message}" should name ${field}`);
            return true;
          },
          `${what} should throw invalid_input naming ${field}`,
        );
      }

      it('submit and submitMany refuse a NUL in tenant, type or idempotencyKey, naming the field, and write nothing', () =>
        run(async ({ ledger }) => {
          const cases: Array<[string, SubmitParams]> = [
            ['tenant', submitParams({ tenant: `ac${NUL}me` })],
            ['type', submitParams({ type: `trans${NUL}code` })],
            ['idempotencyKey', submitParams({ idempotencyKey: `key${NUL}1` })],
          ];
          for (const [field, params] of cases) {
            await expectInvalidNaming(ledger.submit(params), field, `submit with a NUL in ${field}`);
            await expectInvalidNaming(ledger.submitMany([submitParams(), params]), field, `submitMany with a NUL in ${field}`);
          }
          assert.deepEqual(await ledger.countJobsByState(), { queued: 0, running: 0, finished: 0, failed: 0 });
          assert.equal((await ledger.outboxStats()).unsent, 0, 'no outbox row');
        }));

      it('JSON values keep a NUL as given: input, requires and a result round-trip', () =>
        run(async ({ ledger }) => {
          const g = await submitAndGrant(ledger, { input: { text: `a${NUL}b` }, requires: [`gp${NUL}u`] });
          assert.deepEqual(g.job.input, { text: `a${NUL}b` });
          assert.deepEqual(g.job.requires, [`gp${NUL}u`]);
          const res = await settleOk(ledger, g.ref, finished({ log: `frame${NUL}240` }), 'finish');
          assert.deepEqual(res.job.result?.data, { log: `frame${NUL}240` });
          assert.deepEqual(await ledger.getJob(g.job.id), res.job);
          const [row] = resultRows(await drainOutbox(ledger), g.job.id);
          assert.ok(row, 'a result row');
          assertResultBody(row.body, res.job);
        }));

      it('grantLease refuses a NUL in the worker id, naming it, and changes nothing', () =>
        run(async ({ ledger }) => {
          const job = await submitJob(ledger);
          await drainOutbox(ledger);
          const before = await snapshot(ledger, [job.id]);
          await expectInvalidNaming(ledger.grantLease({ jobId: job.id, attempt: 1, worker: `w${NUL}1` }), 'worker', 'a grant to a worker id with a NUL');
          assert.deepEqual(await snapshot(ledger, [job.id]), before);
          expectGranted(await ledger.grantLease({ jobId: job.id, attempt: 1, worker: 'w1' }), 'the grant afterwards');
        }));

      it('settle refuses a NUL in the error code, naming it; nothing changes and the lease stays live', () =>
        run(async ({ ledger }) => {
          const g = await submitAndGrant(ledger);
          await drainOutbox(ledger);
          const before = await snapshot(ledger, [g.job.id]);
          for (const error of [errors.permanent, errors.transient, errors.fatal]) {
            await expectInvalidNaming(
              ledger.settle({ ...g.ref, outcome: failed({ ...error, code: `bad${NUL}code` }) }),
              'error code',
              `a ${error.class} settle with a NUL in its code`,
            );
          }
          assert.deepEqual(await snapshot(ledger, [g.job.id]), before);
          assert.deepEqual(await drainOutbox(ledger), []);
          assert.equal((await ledger.checkLease(g.ref)).live, true);
        }));

      it("a settle is never refused for a NUL in the worker's error message: each NUL is replaced, in the job, its history and its message", () =>
        run(async ({ ledger }) => {
          const message = `ffmpeg said${NUL}: bad${NUL}${NUL} frame`;
          const recorded = { ...errors.permanent, message: `ffmpeg said${REPLACED}: bad${REPLACED}${REPLACED} frame` };
          const g = await submitAndGrant(ledger);
          await drainOutbox(ledger);
          const res = await settleOk(ledger, g.ref, failed({ ...errors.permanent, message }), 'fail_permanent');
          assert.deepEqual(res.job.error, recorded);
          assert.deepEqual(await ledger.getJob(g.job.id), res.job);
          assert.deepEqual(
            (await ledger.getAttempts(g.job.id)).map((a) => a.error),
            [recorded],
          );
          const rows = await drainOutbox(ledger);
          assert.equal(rows.length, 1, 'one result row');
          const [row] = resultRows(rows, g.job.id);
          assert.ok(row, 'a result row');
          assertResultBody(row.body, res.job);
          assert.deepEqual(row.body.error, recorded);
        }));

      it('a transient error message with NULs is replaced alike on retry and on exhaust', () =>
        run(async ({ ledger, clock }) => {
          const recorded = { ...errors.transient, message: `storage${REPLACED}answered 503` };
          const first = await submitAndGrant(ledger, { maxAttempts: 2 });
          const failure = failed({ ...errors.transient, message: `storage${NUL}answered 503` });
          await settleOk(ledger, first.ref, failure, 'retry');
          clock.advance(BASE);
          const second = await grant(ledger, first.job.id);
          const res = await settleOk(ledger, second.ref, failure, 'exhaust');
          assert.equal(res.job.failureReason, 'exhausted');
          assert.deepEqual(res.job.error, recorded);
          assert.deepEqual(
            (await ledger.getAttempts(first.job.id)).map((a) => [a.outcome, a.error]),
            [
              ['retried', recorded],
              ['failed', recorded],
            ],
          );
        }));

      it('recordProgress replaces each NUL of a progress message (job code wrote it)', () =>
        run(async ({ ledger }) => {
          const g = await submitAndGrant(ledger);
          assert.deepEqual(await ledger.recordProgress({ ...g.ref, fraction: 0.5, message: `step${NUL}2` }), { accepted: true });
          const job = await mustGetJob(ledger, g.job.id);
          assert.equal(job.progress, 0.5);
          assert.equal(job.progressMessage, `step${REPLACED}2`);
        }));

      it('reject refuses a NUL in the error code and replaces each NUL of the message', () =>
        run(async ({ ledger }) => {
          const job = await submitJob(ledger, { requires: [`gp${NUL}u`] });
          await drainOutbox(ledger);
          const before = await snapshot(ledger, [job.id]);
          await expectInvalidNaming(
            ledger.reject({ jobId: job.id, error: { ...errors.unroutable, code: `no${NUL}worker` } }),
            'error code',
            'a reject with a NUL in its code',
          );
          assert.deepEqual(await snapshot(ledger, [job.id]), before);
          const res = await ledger.reject({ jobId: job.id, error: { ...errors.unroutable, message: `no worker offers capability gp${NUL}u` } });
          assert.ok(res.rejected, `the reject should succeed, got ${JSON.stringify(res)}`);
          assert.deepEqual(res.job.error, { ...errors.unroutable, message: `no worker offers capability gp${REPLACED}u` });
          assert.deepEqual(await ledger.getJob(job.id), res.job);
          const [row] = resultRows(await drainOutbox(ledger), job.id);
          assert.ok(row, 'a result row');
          assertResultBody(row.body, res.job);
        }));

      it('listJobs refuses a NUL in its tenant or type filter, naming it', () =>
        run(async ({ ledger }) => {
          await submitJob(ledger);
          await expectInvalidNaming(ledger.listJobs({ tenant: `ac${NUL}me` }), 'tenant', 'a listing by a tenant with a NUL');
          await expectInvalidNaming(ledger.listJobs({ type: `trans${NUL}code` }), 'type', 'a listing by a type with a NUL');
        }));
    });
  });
}
