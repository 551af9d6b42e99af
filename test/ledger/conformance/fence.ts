/** Ledger conformance: checkLease, the fence an attempt passes before its effect is kept. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { errors, failed, settleOk, submitAndGrant } from '../testing.js';
import { TTL, reachAttempt2, type Run } from './helpers.js';

export function fenceConformance(run: Run): void {
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
}
