/** Ledger conformance: upload grants, the store cleaner's record of which attempts were handed upload URLs. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import type { ClaimUploadCleanupsParams, Ledger } from '../../../src/ledger/ledger.js';
import { errors, expectLedgerError, failed, finished, settleOk, submitAndGrant } from '../testing.js';
import { TTL, reachAttempt2, type Run } from './helpers.js';

const GRACE = 60_000;
const CLAIM = 30_000;
const params: ClaimUploadCleanupsParams = { graceMs: GRACE, limit: 100, claimMs: CLAIM };

/** The attempts a claim returns for removal, as "job@attempt", sorted. */
async function claimed(ledger: Ledger, overrides: Partial<ClaimUploadCleanupsParams> = {}): Promise<string[]> {
  const batch = await ledger.claimUploadCleanups({ ...params, ...overrides });
  return batch.remove.map((a) => `${a.jobId}@${a.attempt}`).sort();
}

export function uploadGrantsConformance(run: Run): void {
  describe('upload grants (the store cleaner)', () => {
    it('a finished job: its losing attempt is returned for removal once its URLs stopped working grace ago; the delivered one is kept', () =>
      run(async (h) => {
        const { ledger, clock } = h;
        const { first, second } = await reachAttempt2(h, { tenant: 'globex' });
        await ledger.recordUploadGrant({ jobId: first.job.id, attempt: 1, validUntil: first.deadline + 10_000 });
        await ledger.recordUploadGrant({ jobId: second.job.id, attempt: 2, validUntil: second.deadline + 10_000 });
        await settleOk(ledger, second.ref, finished(), 'finish');

        clock.set(first.deadline + 10_000 + GRACE - 1);
        assert.deepEqual(await ledger.claimUploadCleanups(params), { remove: [], kept: 0 }, '1 ms before the grace ran out');

        clock.set(second.deadline + 10_000 + GRACE);
        assert.deepEqual(await ledger.claimUploadCleanups(params), { remove: [{ jobId: first.job.id, attempt: 1, tenant: 'globex' }], kept: 1 });
        await ledger.markUploadsRemoved([{ jobId: first.job.id, attempt: 1 }]);
        clock.advance(10 * CLAIM);
        assert.deepEqual(await ledger.claimUploadCleanups(params), { remove: [], kept: 0 }, 'both grants are closed');
      }));

    it('a failed job: every attempt it handed URLs is returned for removal', () =>
      run(async (h) => {
        const { ledger, clock } = h;
        const { first, second } = await reachAttempt2(h);
        await ledger.recordUploadGrant({ jobId: first.job.id, attempt: 1, validUntil: first.deadline });
        await ledger.recordUploadGrant({ jobId: second.job.id, attempt: 2, validUntil: second.deadline });
        await settleOk(ledger, second.ref, failed(errors.permanent), 'fail_permanent');
        clock.set(second.deadline + GRACE);
        assert.deepEqual(await claimed(ledger), [`${first.job.id}@1`, `${first.job.id}@2`]);
      }));

    it('the live attempt is never returned, whatever its age; an earlier attempt of a job still running is', () =>
      run(async (h) => {
        const { ledger, clock } = h;
        const { first, second } = await reachAttempt2(h);
        await ledger.recordUploadGrant({ jobId: first.job.id, attempt: 1, validUntil: clock.now() });
        await ledger.recordUploadGrant({ jobId: second.job.id, attempt: 2, validUntil: clock.now() });
        clock.advance(GRACE);
        assert.deepEqual(await claimed(ledger), [`${first.job.id}@1`], 'attempt 1 lost: the job is at attempt 2');
        await ledger.markUploadsRemoved([{ jobId: first.job.id, attempt: 1 }]);
        clock.advance(TTL);
        assert.deepEqual(await claimed(ledger, { claimMs: 10 * TTL }), [], 'attempt 2 expired, but the sweep has not moved the job on: not decided yet');
        await ledger.sweep();
        assert.deepEqual(await claimed(ledger, { claimMs: 10 * TTL }), [`${first.job.id}@2`], 'swept to attempt 3: attempt 2 lost');
      }));

    it('a claim holds the batch for claimMs; a claim that ran out is taken again, a removed one never', () =>
      run(async ({ ledger, clock }) => {
        const g = await submitAndGrant(ledger);
        await ledger.recordUploadGrant({ jobId: g.job.id, attempt: 1, validUntil: g.deadline });
        await settleOk(ledger, g.ref, failed(errors.permanent));
        clock.set(g.deadline + GRACE);
        assert.deepEqual(await claimed(ledger), [`${g.job.id}@1`]);
        assert.deepEqual(await claimed(ledger), [], 'a second cleaner at the same time gets nothing');
        clock.advance(CLAIM - 1);
        assert.deepEqual(await claimed(ledger), [], 'still claimed');
        clock.advance(1);
        assert.deepEqual(await claimed(ledger), [`${g.job.id}@1`], 'the first cleaner is gone: taken again');
        await ledger.markUploadsRemoved([{ jobId: g.job.id, attempt: 1 }]);
        await ledger.markUploadsRemoved([{ jobId: g.job.id, attempt: 1 }]);
        clock.advance(CLAIM);
        assert.deepEqual(await claimed(ledger), [], 'removed (twice, harmlessly): closed for good');
      }));

    it('recordUploadGrant keeps the latest validUntil: the grace counts from the last URL handed out', () =>
      run(async ({ ledger, clock }) => {
        const g = await submitAndGrant(ledger);
        await ledger.recordUploadGrant({ jobId: g.job.id, attempt: 1, validUntil: g.deadline + 5000 });
        await ledger.recordUploadGrant({ jobId: g.job.id, attempt: 1, validUntil: g.deadline });
        await settleOk(ledger, g.ref, failed(errors.permanent));
        clock.set(g.deadline + GRACE);
        assert.deepEqual(await claimed(ledger), [], 'the earlier validUntil did not shorten the grant');
        clock.set(g.deadline + 5000 + GRACE);
        assert.deepEqual(await claimed(ledger), [`${g.job.id}@1`]);
      }));

    it('a batch takes at most limit attempts, the earliest validUntil first', () =>
      run(async ({ ledger, clock }) => {
        const jobs: string[] = [];
        for (const offset of [3000, 1000, 2000]) {
          const g = await submitAndGrant(ledger);
          await ledger.recordUploadGrant({ jobId: g.job.id, attempt: 1, validUntil: clock.now() + offset });
          await settleOk(ledger, g.ref, failed(errors.permanent));
          jobs.push(g.job.id);
        }
        clock.advance(3000 + GRACE);
        const batch = await ledger.claimUploadCleanups({ ...params, limit: 2 });
        assert.deepEqual(
          batch.remove.map((a) => a.jobId),
          [jobs[1], jobs[2]],
        );
        assert.deepEqual(await claimed(ledger, { limit: 2 }), [`${jobs[0]}@1`]);
      }));

    it('bad input is invalid_input', () =>
      run(async ({ ledger }) => {
        await expectLedgerError(ledger.recordUploadGrant({ jobId: '', attempt: 1, validUntil: 0 }), 'invalid_input', 'an empty job id');
        await expectLedgerError(ledger.recordUploadGrant({ jobId: 'j', attempt: 0, validUntil: 0 }), 'invalid_input', 'attempt 0');
        await expectLedgerError(ledger.claimUploadCleanups({ ...params, limit: 0 }), 'invalid_input', 'limit 0');
        await expectLedgerError(ledger.claimUploadCleanups({ ...params, claimMs: 0 }), 'invalid_input', 'claimMs 0');
        await expectLedgerError(ledger.markUploadsRemoved([{ jobId: 'j', attempt: 1.5 }]), 'invalid_input', 'a fractional attempt');
      }));
  });
}
