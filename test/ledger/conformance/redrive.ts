/** Ledger conformance: redrive (a new job from a failed one, linked both ways) and the holding area. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import type { Ledger } from '../../../src/ledger/ledger.js';
import {
  drainOutbox,
  errors,
  failed,
  finished,
  freshKey,
  mustGetJob,
  resultRows,
  settleOk,
  submitAndGrant,
  submitJob,
  workRows,
  type LedgerHarness,
} from '../testing.js';
import type { Run } from './helpers.js';

/** A job of `tenant` and `type` that failed permanently with `code`. */
async function failedJob(ledger: Ledger, type = 'transcode', code = 'bad_plan', tenant = 'acme') {
  const g = await submitAndGrant(ledger, { type, tenant });
  return (await settleOk(ledger, g.ref, failed({ ...errors.permanent, code }), 'fail_permanent')).job;
}

export function redriveConformance(run: Run): void {
  describe('redrive', () => {
    it('retrying a failed job makes a new queued job with the same submission, linked both ways; the failed one is untouched', () =>
      run(async ({ ledger, clock }) => {
        const g = await submitAndGrant(ledger, { idempotencyKey: freshKey(), maxAttempts: 2, timeoutSeconds: 30 });
        const old = (await settleOk(ledger, g.ref, failed(errors.permanent), 'fail_permanent')).job;
        const before = await drainOutbox(ledger);
        assert.equal(resultRows(before, old.id).length, 1);
        clock.advance(500);
        const res = await ledger.retry({ jobId: old.id, tenant: 'acme' });
        assert.ok(res.outcome === 'retried' && res.created);
        const { job } = res;
        assert.notEqual(job.id, old.id);
        assert.equal(res.retryOf, old.id);
        assert.deepEqual(
          [job.tenant, job.type, job.input, job.requires, job.maxAttempts, job.timeoutSeconds],
          [old.tenant, old.type, old.input, old.requires, old.maxAttempts, old.timeoutSeconds],
        );
        assert.equal(job.state, 'queued');
        assert.equal(job.attempt, 1);
        assert.equal(job.idempotencyKey, null, 'the key names the first job');
        assert.equal(job.createdAt, clock.now());
        assert.deepEqual(await mustGetJob(ledger, job.id), job);
        assert.deepEqual(await mustGetJob(ledger, old.id), old, 'the failed job keeps its failure');
        assert.deepEqual(await ledger.getRetryLinks(old.id), { retryOf: null, retriedBy: job.id });
        assert.deepEqual(await ledger.getRetryLinks(job.id), { retryOf: old.id, retriedBy: null });
        const rows = await drainOutbox(ledger);
        assert.equal(workRows(rows, job.id).length, 1, 'the new job has its work message');
        assert.equal(resultRows(rows).length, 0, 'no result message for either');
        // The new job runs and ends with a result message of its own.
        const granted = await ledger.grantLease({ jobId: job.id, attempt: 1, worker: 'w' });
        assert.ok(granted.granted);
        await settleOk(ledger, { jobId: job.id, attempt: 1, token: granted.token }, finished(), 'finish');
        const after = await drainOutbox(ledger);
        assert.equal(resultRows(after, job.id).length, 1);
        assert.equal(resultRows(after, old.id).length, 0, "the old job's one result message is not sent again");
      }));

    it('a job retried before answers the job made from it: one retry per failed job', () =>
      run(async ({ ledger }) => {
        const old = await failedJob(ledger);
        const first = await ledger.retry({ jobId: old.id });
        const again = await ledger.retry({ jobId: old.id, tenant: 'acme' });
        assert.ok(first.outcome === 'retried' && again.outcome === 'retried');
        assert.equal(first.created, true);
        assert.equal(again.created, false);
        assert.equal(again.job.id, first.job.id);
        assert.equal((await ledger.listJobs({ limit: 10 })).jobs.length, 2);
      }));

    it('refuses a job that did not fail, and one of another tenant or none', () =>
      run(async ({ ledger }) => {
        const queued = await submitJob(ledger);
        assert.deepEqual(await ledger.retry({ jobId: queued.id }), { outcome: 'refused', reason: 'not_failed', job: queued });
        const g = await submitAndGrant(ledger);
        const done = (await settleOk(ledger, g.ref, finished(), 'finish')).job;
        const refused = await ledger.retry({ jobId: done.id });
        assert.ok(refused.outcome === 'refused' && refused.reason === 'not_failed');
        const old = await failedJob(ledger);
        assert.deepEqual(await ledger.retry({ jobId: old.id, tenant: 'globex' }), { outcome: 'refused', reason: 'unknown_job' });
        assert.deepEqual(await ledger.retry({ jobId: 'no-such-job' }), { outcome: 'refused', reason: 'unknown_job' });
      }));

    it('a cancelled job can be retried one by one', () =>
      run(async ({ ledger }) => {
        const job = await submitJob(ledger);
        await ledger.cancel({ jobId: job.id });
        const res = await ledger.retry({ jobId: job.id });
        assert.ok(res.outcome === 'retried' && res.created);
      }));

    it('retryMany takes unretried failed jobs matching the filter, oldest end first, in batches, never a cancelled one', () =>
      run(async (h: LedgerHarness) => {
        const { ledger, clock } = h;
        const a1 = await failedJob(ledger, 'transcode', 'bad_plan');
        clock.advance(10);
        const a2 = await failedJob(ledger, 'transcode', 'bad_plan');
        clock.advance(10);
        const a3 = await failedJob(ledger, 'transcode', 'bad_plan');
        await failedJob(ledger, 'transcode', 'other_code');
        await failedJob(ledger, 'render', 'bad_plan');
        await failedJob(ledger, 'transcode', 'bad_plan', 'globex');
        const cancelled = await submitJob(ledger);
        await ledger.cancel({ jobId: cancelled.id });
        const filter = { tenant: 'acme', type: 'transcode', code: 'bad_plan' };
        const first = await ledger.retryMany({ ...filter, limit: 2 });
        assert.deepEqual(
          first.map((r) => r.retryOf),
          [a1.id, a2.id],
        );
        const second = await ledger.retryMany({ ...filter, limit: 2 });
        assert.deepEqual(
          second.map((r) => r.retryOf),
          [a3.id],
        );
        assert.deepEqual(await ledger.retryMany({ ...filter, limit: 2 }), [], 'each failed job is retried once');
        for (const { retryOf, job } of [...first, ...second]) {
          assert.deepEqual(await ledger.getRetryLinks(retryOf), { retryOf: null, retriedBy: job.id });
          assert.equal(job.state, 'queued');
        }
        // By time: only the jobs that ended in the range.
        const b1 = await failedJob(ledger, 'encode', 'x');
        clock.advance(100);
        const b2 = await failedJob(ledger, 'encode', 'x');
        const ranged = await ledger.retryMany({ type: 'encode', endedAfter: b1.endedAt! + 1, endedBefore: b2.endedAt! + 1, limit: 10 });
        assert.deepEqual(
          ranged.map((r) => r.retryOf),
          [b2.id],
        );
        // Every tenant's, without a tenant (an admin).
        const all = await ledger.retryMany({ code: 'bad_plan', limit: 10 });
        assert.equal(all.length, 2, "render's and globex's");
        assert.equal((await ledger.retryMany({ limit: 10 })).map((r) => r.retryOf).includes(cancelled.id), false);
      }));

    it('retryMany refuses a bad batch size', () =>
      run(async ({ ledger }) => {
        await assert.rejects(ledger.retryMany({ limit: 0 }), /limit/);
      }));

    it('the holding area groups unretried failed jobs by type and error code, largest first, by tenant and time', () =>
      run(async ({ ledger, clock }) => {
        const first = await failedJob(ledger, 'transcode', 'ffmpeg_refused');
        clock.advance(1000);
        const middle = await failedJob(ledger, 'transcode', 'ffmpeg_refused');
        clock.advance(1000);
        const last = await failedJob(ledger, 'transcode', 'ffmpeg_refused');
        const render = await failedJob(ledger, 'render', 'bad_plan');
        await failedJob(ledger, 'render', 'bad_plan', 'globex');
        const cancelled = await submitJob(ledger);
        await ledger.cancel({ jobId: cancelled.id });
        const g = await submitAndGrant(ledger);
        await settleOk(ledger, g.ref, finished(), 'finish');
        const groups = await ledger.listFailureGroups({ tenant: 'acme' });
        assert.equal(groups.length, 2);
        const [big, small] = groups;
        assert.deepEqual(
          { ...big!, sampleJobId: '' },
          { type: 'transcode', code: 'ffmpeg_refused', count: 3, firstEndedAt: first.endedAt!, lastEndedAt: last.endedAt!, sampleJobId: '' },
        );
        assert.ok([first.id, middle.id, last.id].includes(big!.sampleJobId), 'a job of the group');
        assert.deepEqual(small, {
          type: 'render',
          code: 'bad_plan',
          count: 1,
          firstEndedAt: render.endedAt!,
          lastEndedAt: render.endedAt!,
          sampleJobId: render.id,
        });
        assert.equal((await ledger.listFailureGroups({})).find((gr) => gr.type === 'render')?.count, 2, 'every tenant');
        const ranged = await ledger.listFailureGroups({ tenant: 'acme', endedAfter: last.endedAt!, endedBefore: last.endedAt! + 1 });
        assert.equal(ranged.find((gr) => gr.type === 'transcode')?.count, 1);
        // A retried job leaves the holding area.
        await ledger.retry({ jobId: render.id });
        assert.deepEqual(
          (await ledger.listFailureGroups({ tenant: 'acme' })).map((gr) => gr.type),
          ['transcode'],
        );
      }));
  });
}
