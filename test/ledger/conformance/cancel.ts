/** Ledger conformance: cancel: a queued job ends at once, a running one is asked to stop. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  assertResultBody,
  drainOutbox,
  errors,
  expectGrantRefused,
  failed,
  finished,
  mustGetJob,
  resultRows,
  settleOk,
  snapshot,
  submitAndGrant,
  submitJob,
} from '../testing.js';
import type { Run } from './helpers.js';

export function cancelConformance(run: Run): void {
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
}
