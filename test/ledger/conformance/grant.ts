/** Ledger conformance: grantLease: which work message grants a lease to which worker, and when. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  errors,
  expectGranted,
  expectGrantRefused,
  failed,
  finished,
  grant,
  mustGetJob,
  proofOf,
  settleOk,
  snapshot,
  submitAndGrant,
  submitJob,
} from '../testing.js';
import { TTL, BASE, reachAttempt2, type Run } from './helpers.js';

export function grantConformance(run: Run): void {
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

    it('a request naming another tenant is refused as unknown_job, queued or held, and changes nothing', () =>
      run(async ({ ledger }) => {
        const job = await submitJob(ledger, { tenant: 'acme' });
        const ask = (tenant: string) => ledger.grantLease({ jobId: job.id, tenant, attempt: 1, worker: 'w1', holderProof: proofOf('w1') });
        const queued = await snapshot(ledger, [job.id]);
        expectGrantRefused(await ask('globex'), 'unknown_job', 'another tenant');
        assert.deepEqual(await snapshot(ledger, [job.id]), queued, 'still queued, no attempt');
        const g = expectGranted(await ask('acme'), 'its own tenant');
        const held = await snapshot(ledger, [job.id]);
        expectGrantRefused(await ask('globex'), 'unknown_job', 'its holder, naming another tenant');
        assert.deepEqual(await snapshot(ledger, [job.id]), held, 'the lease as it was');
        assert.equal(expectGranted(await ask('acme'), 'its holder again').token, g.token);
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
}
