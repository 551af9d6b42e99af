/** Ledger conformance: renewLeases: a worker extends the leases it holds and learns which it lost. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { finished, mustGetJob, settleOk, submitAndGrant } from '../testing.js';
import { TTL, reachAttempt2, type Run } from './helpers.js';

export function renewConformance(run: Run): void {
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
}
