/** Ledger conformance: the outbox (outboxTake, outboxClaim, outboxUnclaim, outboxMarkSent, outboxSetAside, outboxStats). */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import type { Job } from '../../../src/ledger/ledger.js';
import { drainOutbox, errors, expectGrantRefused, expectLedgerError, failed, settleOk, submitAndGrant, submitJob } from '../testing.js';
import type { Run } from './helpers.js';

export function outboxConformance(run: Run): void {
  describe('outbox', () => {
    it('outboxTake returns due unsent rows oldest first, at most `limit`, and does not mark them sent', () =>
      run(async ({ ledger, clock }) => {
        const jobs: Job[] = [];
        for (let i = 0; i < 3; i++) {
          jobs.push(await submitJob(ledger));
          clock.advance(1);
        }
        const two = await ledger.outboxTake(2);
        assert.deepEqual(
          two.map((r) => r.jobId),
          [jobs[0]?.id, jobs[1]?.id],
        );
        const all = await ledger.outboxTake(10);
        assert.deepEqual(
          all.map((r) => r.jobId),
          jobs.map((j) => j.id),
          'untaken rows come back, in order',
        );
        assert.deepEqual(all.slice(0, 2), two, 'the same rows, same ids');
        assert.equal(new Set(all.map((r) => r.id)).size, 3);
      }));

    it('outboxMarkSent removes rows from later takes and from outboxStats', () =>
      run(async ({ ledger, clock }) => {
        const t0 = clock.now();
        const jobs: Job[] = [];
        for (let i = 0; i < 3; i++) {
          jobs.push(await submitJob(ledger));
          clock.advance(1);
        }
        assert.deepEqual(await ledger.outboxStats(), { unsent: 3, oldestCreatedAt: t0 });
        const rows = await ledger.outboxTake(10);
        await ledger.outboxMarkSent(rows.slice(0, 2).map((r) => r.id));
        assert.deepEqual(
          (await ledger.outboxTake(10)).map((r) => r.jobId),
          [jobs[2]?.id],
        );
        assert.deepEqual(await ledger.outboxStats(), { unsent: 1, oldestCreatedAt: t0 + 2 });
        await ledger.outboxMarkSent(rows.map((r) => r.id));
        assert.deepEqual(await ledger.outboxTake(10), []);
        assert.deepEqual(await ledger.outboxStats(), { unsent: 0, oldestCreatedAt: null });
      }));

    it('outboxSetAside fails the queued job of a work row as permanent/undeliverable, once, and its row leaves the outbox', () =>
      run(async ({ ledger, clock }) => {
        const bad = await submitJob(ledger);
        const good = await submitJob(ledger);
        const [badRow, goodRow] = await ledger.outboxTake(10);
        clock.advance(5);
        const { failedJobs } = await ledger.outboxSetAside([{ id: badRow!.id, reason: 'routing key longer than 255 bytes' }]);
        assert.deepEqual(
          failedJobs.map((j) => j.id),
          [bad.id],
        );
        const failed = await ledger.getJob(bad.id);
        assert.deepEqual(failedJobs[0], failed);
        assert.equal(failed?.state, 'failed');
        assert.equal(failed?.failureReason, 'permanent');
        assert.deepEqual(failed?.error, { class: 'permanent', code: 'undeliverable', message: 'routing key longer than 255 bytes' });
        assert.equal(failed?.endedAt, clock.now());
        assert.equal((await ledger.getJob(good.id))?.state, 'queued', 'the other job is untouched');
        const rows = await ledger.outboxTake(10);
        assert.deepEqual(
          rows.map((r) => [r.kind, r.jobId]),
          [
            ['work', good.id],
            ['result', bad.id],
          ],
          'the bad row is gone; its failure message follows',
        );
        assert.equal(rows[0]?.id, goodRow?.id);
        expectGrantRefused(await ledger.grantLease({ jobId: bad.id, attempt: 1, worker: 'w1' }), 'ended');
        // Again, or for a result row: the row leaves the outbox, no job changes.
        const result = rows[1]!;
        assert.deepEqual(
          await ledger.outboxSetAside([
            { id: badRow!.id, reason: 'again' },
            { id: result.id, reason: 'no' },
            { id: 987_654_321, reason: 'none' },
          ]),
          {
            failedJobs: [],
          },
        );
        assert.deepEqual(await ledger.getJob(bad.id), failed);
        assert.deepEqual(
          (await ledger.outboxTake(10)).map((r) => r.jobId),
          [good.id],
        );
        assert.deepEqual(await ledger.outboxStats(), { unsent: 1, oldestCreatedAt: goodRow!.createdAt });
      }));

    it('outboxSetAside of a work row for an attempt the job has left changes no job', () =>
      run(async ({ ledger }) => {
        const granted = await submitAndGrant(ledger);
        const [stale] = await ledger.outboxTake(10);
        assert.equal(stale?.jobId, granted.job.id);
        assert.deepEqual(await ledger.outboxSetAside([{ id: stale.id, reason: 'refused' }]), { failedJobs: [] });
        assert.equal((await ledger.getJob(granted.job.id))?.state, 'running');
      }));

    it('outboxMarkSent of already-sent or unknown ids is harmless', () =>
      run(async ({ ledger }) => {
        await submitJob(ledger);
        const rows = await drainOutbox(ledger);
        await ledger.outboxMarkSent(rows.map((r) => r.id));
        await ledger.outboxMarkSent([987_654_321]);
        await ledger.outboxMarkSent([]);
        assert.deepEqual(await ledger.outboxTake(10), []);
        const job = await submitJob(ledger);
        assert.deepEqual(
          (await drainOutbox(ledger)).map((r) => r.jobId),
          [job.id],
        );
      }));
    it("outboxClaim takes due unclaimed rows oldest first, and a claimed row is nobody else's until its claim runs out", () =>
      run(async ({ ledger, clock }) => {
        const jobs: Job[] = [];
        for (let i = 0; i < 3; i++) {
          jobs.push(await submitJob(ledger));
          clock.advance(1);
        }
        const first = await ledger.outboxClaim({ limit: 2, claimMs: 1000 });
        assert.deepEqual(
          first.map((r) => r.jobId),
          [jobs[0]?.id, jobs[1]?.id],
        );
        clock.advance(500);
        const second = await ledger.outboxClaim({ limit: 10, claimMs: 1000 });
        assert.deepEqual(
          second.map((r) => r.jobId),
          [jobs[2]?.id],
          'another relay takes only the unclaimed row',
        );
        assert.deepEqual(await ledger.outboxClaim({ limit: 10, claimMs: 1000 }), [], 'every row is claimed');
        assert.equal((await ledger.outboxTake(10)).length, 3, 'claimed rows are still unsent');
        assert.deepEqual(await ledger.outboxStats(), { unsent: 3, oldestCreatedAt: jobs[0]!.createdAt });

        clock.advance(500);
        assert.deepEqual(
          (await ledger.outboxClaim({ limit: 10, claimMs: 1000 })).map((r) => r.jobId),
          [jobs[0]?.id, jobs[1]?.id],
          "the first claim ran out (its relay died): its rows are taken again, the second's are not",
        );
        assert.deepEqual(await ledger.outboxClaim({ limit: 10, claimMs: 1000 }), [], 'taken again means claimed again');
      }));

    it('outboxUnclaim makes rows claimable at once; a sent row is never claimed', () =>
      run(async ({ ledger }) => {
        const a = await submitJob(ledger);
        const b = await submitJob(ledger);
        const [rowA, rowB] = await ledger.outboxClaim({ limit: 10, claimMs: 60_000 });
        assert.deepEqual([rowA?.jobId, rowB?.jobId], [a.id, b.id]);
        await ledger.outboxMarkSent([rowA!.id]);
        await ledger.outboxUnclaim([rowA!.id, rowB!.id]);
        await ledger.outboxUnclaim([]);
        assert.deepEqual(await ledger.outboxClaim({ limit: 10, claimMs: 60_000 }), [rowB], 'the same row, same body');
        await ledger.outboxMarkSent([rowB!.id]);
        await ledger.outboxUnclaim([rowB!.id]);
        assert.deepEqual(await ledger.outboxClaim({ limit: 10, claimMs: 60_000 }), []);
      }));

    it('outboxClaim leaves rows not yet due alone and refuses a bad limit or claim', () =>
      run(async ({ ledger }) => {
        const granted = await submitAndGrant(ledger);
        await drainOutbox(ledger);
        await settleOk(ledger, granted.ref, failed(errors.transient), 'retry');
        assert.deepEqual(await ledger.outboxClaim({ limit: 10, claimMs: 1000 }), [], 'the retry waits for its backoff');
        for (const params of [
          { limit: 0, claimMs: 1000 },
          { limit: 1.5, claimMs: 1000 },
          { limit: 10, claimMs: 0 },
          { limit: 10, claimMs: Number.NaN },
        ]) {
          await expectLedgerError(ledger.outboxClaim(params), 'invalid_input', JSON.stringify(params));
        }
      }));
  });
}
