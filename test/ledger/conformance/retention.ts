/** Ledger conformance: retention (old ended jobs pruned with what names them, never before their result message went out). */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { drainOutbox, errors, failed, finished, settleOk, submitAndGrant, submitJob } from '../testing.js';
import type { Run } from './helpers.js';

export function retentionConformance(run: Run): void {
  describe('retention', () => {
    it('prunes ended jobs older than the cut-off, with their attempts, outbox rows and retry links, once their result went out', () =>
      run(async ({ ledger, clock }) => {
        const g1 = await submitAndGrant(ledger);
        const done = (await settleOk(ledger, g1.ref, finished(), 'finish')).job;
        const g2 = await submitAndGrant(ledger);
        const bad = (await settleOk(ledger, g2.ref, failed(errors.permanent), 'fail_permanent')).job;
        const queued = await submitJob(ledger);
        const retried = await ledger.retry({ jobId: bad.id });
        assert.ok(retried.outcome === 'retried');
        clock.advance(1000);
        const cutOff = clock.now() - 500;
        assert.deepEqual(await ledger.findPrunableJobs({ endedBefore: cutOff, limit: 10 }), [], 'no result message went out yet');
        await drainOutbox(ledger);
        const found = await ledger.findPrunableJobs({ endedBefore: cutOff, limit: 10 });
        assert.deepEqual(
          found.map((j) => j.id),
          [done.id, bad.id],
          'ended ones, earliest first; never a queued one',
        );
        assert.deepEqual(found[0], { id: done.id, tenant: 'acme', state: 'finished', attempt: 1, result: done.result });
        assert.deepEqual(await ledger.findPrunableJobs({ endedBefore: done.endedAt! - 1, limit: 10 }), [], 'none ended before');
        assert.deepEqual(await ledger.pruneJobs({ jobIds: [done.id, bad.id, queued.id], endedBefore: cutOff }), [done.id, bad.id]);
        assert.equal(await ledger.getJob(done.id), undefined);
        assert.equal(await ledger.getJob(bad.id), undefined);
        assert.deepEqual(await ledger.getAttempts(done.id), []);
        assert.ok(await ledger.getJob(queued.id));
        assert.deepEqual(await ledger.getRetryLinks(retried.job.id), { retryOf: bad.id, retriedBy: null }, 'the newer job still says where it came from');
        assert.deepEqual(await ledger.pruneJobs({ jobIds: [done.id], endedBefore: cutOff }), [], 'pruned once');
        assert.deepEqual(await ledger.pruneJobs({ jobIds: [], endedBefore: cutOff }), []);
      }));

    it('a job whose result message is still unsent is never pruned', () =>
      run(async ({ ledger, clock }) => {
        const g = await submitAndGrant(ledger);
        await drainOutbox(ledger);
        const done = (await settleOk(ledger, g.ref, finished(), 'finish')).job;
        clock.advance(10_000);
        assert.deepEqual(await ledger.pruneJobs({ jobIds: [done.id], endedBefore: clock.now() }), []);
        assert.ok(await ledger.getJob(done.id));
      }));

    it('a job with an open upload grant waits for the store cleaner', () =>
      run(async ({ ledger, clock }) => {
        const g = await submitAndGrant(ledger);
        await ledger.recordUploadGrant({ jobId: g.job.id, attempt: 1, validUntil: clock.now() + 100 });
        const done = (await settleOk(ledger, g.ref, finished(), 'finish')).job;
        await drainOutbox(ledger);
        clock.advance(10_000);
        assert.deepEqual(await ledger.findPrunableJobs({ endedBefore: clock.now(), limit: 10 }), []);
        await ledger.claimUploadCleanups({ graceMs: 0, limit: 10, claimMs: 1000 });
        assert.deepEqual(
          (await ledger.findPrunableJobs({ endedBefore: clock.now(), limit: 10 })).map((j) => j.id),
          [done.id],
          'the delivered attempt closed as kept',
        );
      }));
  });
}
