/** Ledger conformance: reject, a queued job failed as unroutable. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { assertResultBody, drainOutbox, errors, expectGrantRefused, finished, resultRows, settleOk, snapshot, submitAndGrant, submitJob } from '../testing.js';
import type { Run } from './helpers.js';

export function rejectConformance(run: Run): void {
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
}
