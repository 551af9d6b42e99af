/** Ledger conformance: recordProgress, accepted from the live lease alone. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { finished, mustGetJob, settleOk, snapshot, submitAndGrant } from '../testing.js';
import { TTL, reachAttempt2, type Run } from './helpers.js';

export function progressConformance(run: Run): void {
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
}
