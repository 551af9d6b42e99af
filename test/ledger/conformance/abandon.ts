/**
 * Ledger conformance: abandon, a grant its holder never took up. A grant answered after the
 * worker stopped waiting for it would otherwise hold its slot for a whole TTL and then cost
 * an attempt; with grantWindowMs set, a grant not followed by a renewal, progress or settle
 * within the window goes back to queued at the same attempt, its token dead, its work sent
 * again, and no attempt spent.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import type { Ledger } from '../../../src/ledger/ledger.js';
import {
  drainOutbox,
  expectGranted,
  finished,
  grant,
  proofOf,
  settleOk,
  snapshot,
  submitAndGrant,
  submitJob,
  testConfig,
  workBody,
  workRows,
} from '../testing.js';
import { TTL, type Run } from './helpers.js';

const GRANT_WINDOW = 15_000;
const fifo = { ...testConfig, grantWindowMs: GRANT_WINDOW };
const fair = { ...fifo, dispatch: 'fair' } as const;
const FLEET_WINDOW = 60_000;

async function worker(ledger: Ledger, name: string, slots: number): Promise<void> {
  const report = { worker: name, jobTypes: ['transcode'], capabilities: ['ffmpeg'], heldBack: [], slots, running: 0 };
  assert.equal((await ledger.heartbeat({ worker: name, report, proof: proofOf(name), windowMs: FLEET_WINDOW, leases: [] })).recorded, true);
}

export function abandonConformance(run: Run): void {
  describe('abandon (a grant never taken up)', () => {
    it('goes back to queued at the same attempt after the window: open attempt row gone, work sent again, old token refused as superseded', () =>
      run(async ({ ledger, clock }) => {
        const g = await submitAndGrant(ledger, { maxAttempts: 2 });
        await drainOutbox(ledger);
        clock.advance(GRANT_WINDOW - 1);
        assert.deepEqual((await ledger.sweep()).abandoned, [], 'inside the window: still held');
        clock.advance(1);
        assert.deepEqual((await ledger.sweep()).abandoned, [{ jobId: g.job.id, attempt: 1 }]);

        const job = await ledger.getJob(g.job.id);
        assert.equal(job?.state, 'queued');
        assert.equal(job?.attempt, 1, 'no attempt spent');
        assert.equal(job?.leaseToken, null);
        assert.equal(job?.notBefore, g.job.notBefore, 'due as before');
        assert.deepEqual(await ledger.getAttempts(g.job.id), [], 'the attempt number is free to be granted again');
        assert.deepEqual(
          workRows(await drainOutbox(ledger)).map((r) => r.body),
          [workBody(g.job, 1)],
          'fifo: the work message of the same attempt, again',
        );

        const before = await snapshot(ledger, [g.job.id]);
        assert.deepEqual((await ledger.renewLeases({ worker: 'worker-a', leases: [g.ref] })).lost, [{ jobId: g.job.id, attempt: 1, reason: 'superseded' }]);
        assert.deepEqual(await ledger.recordProgress({ ...g.ref, fraction: 0.5 }), { accepted: false, reason: 'superseded' });
        assert.deepEqual(await ledger.checkLease(g.ref), { live: false, reason: 'superseded' });
        assert.deepEqual(await ledger.settle({ ...g.ref, outcome: finished() }), { accepted: false, reason: 'superseded' });
        assert.deepEqual(await snapshot(ledger, [g.job.id]), before, 'the dead token changed nothing');

        const again = await grant(ledger, g.job.id, 'worker-b');
        assert.equal(again.ref.attempt, 1);
        assert.notEqual(again.ref.token, g.ref.token, 'a new token');
        assert.deepEqual(await ledger.settle({ ...g.ref, outcome: finished() }), { accepted: false, reason: 'superseded' }, 'the old token stays dead');
        await settleOk(ledger, again.ref, finished(), 'finish');
        assert.deepEqual(
          (await ledger.getAttempts(g.job.id)).map((a) => [a.attempt, a.worker, a.outcome]),
          [[1, 'worker-b', 'finished']],
        );
      }, fifo));

    it('a renewal or a progress report within the window takes the grant up: only its expiry takes it back, spending the attempt', () =>
      run(async ({ ledger, clock }) => {
        const renewed = await submitAndGrant(ledger, { maxAttempts: 2 });
        const progressed = await submitAndGrant(ledger, { maxAttempts: 2 });
        clock.advance(GRANT_WINDOW - 1);
        assert.deepEqual((await ledger.renewLeases({ worker: 'worker-a', leases: [renewed.ref] })).lost, []);
        assert.deepEqual(await ledger.recordProgress({ ...progressed.ref, fraction: 0.1 }), { accepted: true });
        clock.advance(GRANT_WINDOW);
        assert.deepEqual((await ledger.sweep()).abandoned, [], 'taken up: never abandoned');
        clock.advance(TTL);
        const swept = await ledger.sweep();
        assert.deepEqual(swept.abandoned, []);
        assert.deepEqual(
          swept.requeued.map((r) => r.attempt),
          [2, 2],
          'expired, at n+1',
        );
      }, fifo));

    it('a slow holder asking again gets its lease back and a new window; a cancelled grant is left to its expiry', () =>
      run(async ({ ledger, clock }) => {
        const g = await submitAndGrant(ledger);
        clock.advance(GRANT_WINDOW - 1_000);
        const again = expectGranted(await ledger.grantLease({ jobId: g.job.id, attempt: 1, worker: 'worker-a', holderProof: proofOf('worker-a') }));
        assert.equal(again.token, g.ref.token);
        clock.advance(2_000);
        assert.deepEqual((await ledger.sweep()).abandoned, [], 'the window runs from the second answer');
        clock.advance(GRANT_WINDOW);
        assert.deepEqual((await ledger.sweep()).abandoned, [{ jobId: g.job.id, attempt: 1 }]);

        const cancelled = await submitAndGrant(ledger);
        await ledger.cancel({ jobId: cancelled.job.id });
        clock.advance(GRANT_WINDOW);
        assert.deepEqual((await ledger.sweep()).abandoned, [], 'a cancel request is not put back to the queue');
        clock.advance(TTL);
        assert.deepEqual((await ledger.sweep()).cancelled, [cancelled.job.id]);
      }, fifo));

    it('without a window (grantWindowMs null) a grant is only taken back by its expiry', () =>
      run(
        async ({ ledger, clock }) => {
          const g = await submitAndGrant(ledger, { maxAttempts: 2 });
          clock.advance(TTL - 1);
          assert.deepEqual((await ledger.sweep()).abandoned, []);
          assert.equal((await ledger.getJob(g.job.id))?.state, 'running');
        },
        { ...fifo, grantWindowMs: null },
      ));

    it('fair: the abandoned job waits for the dispatcher again, and its slot is free in the same pass', () =>
      run(async ({ ledger, clock }) => {
        await worker(ledger, 'w1', 1);
        const job = await submitJob(ledger);
        assert.deepEqual(
          (await ledger.dispatch({ fleetWindowMs: FLEET_WINDOW })).released.map((r) => [r.jobId, r.attempt]),
          [[job.id, 1]],
        );
        await drainOutbox(ledger);
        await grant(ledger, job.id, 'w1');
        clock.advance(GRANT_WINDOW);
        const pass = await ledger.dispatch({ fleetWindowMs: FLEET_WINDOW });
        assert.deepEqual(pass.abandoned, [{ jobId: job.id, attempt: 1 }]);
        assert.deepEqual(
          pass.released.map((r) => [r.jobId, r.attempt]),
          [[job.id, 1]],
          'released again for the same attempt',
        );
        assert.deepEqual(
          workRows(await drainOutbox(ledger)).map((r) => [r.jobId, r.body.attempt]),
          [[job.id, 1]],
        );
        expectGranted(await ledger.grantLease({ jobId: job.id, attempt: 1, worker: 'w1' }), 'the same attempt, granted again');
      }, fair));
  });
}
