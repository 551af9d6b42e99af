/** Ledger conformance: release, a worker handing a lease back. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { drainOutbox, expectGranted, expectLedgerError, finished, resultRows, settleOk, snapshot, submitAndGrant, workBody, workRows } from '../testing.js';
import { TTL, type Run } from './helpers.js';

export function releaseConformance(run: Run): void {
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

    it('a release naming another tenant is refused as unknown_job and changes nothing; naming its own, accepted', () =>
      run(async ({ ledger }) => {
        const g = await submitAndGrant(ledger, { tenant: 'acme' });
        const before = await snapshot(ledger, [g.job.id]);
        assert.deepEqual(await ledger.release({ ...g.ref, tenant: 'globex', error: gpuLocked }), { accepted: false, reason: 'unknown_job' });
        assert.deepEqual(await snapshot(ledger, [g.job.id]), before);
        assert.equal((await ledger.release({ ...g.ref, tenant: 'acme', error: gpuLocked })).accepted, true);
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
}
