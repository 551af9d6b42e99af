/** Ledger conformance: submit and submitMany: the new job (queued@1), its one work row, idempotency keys. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { LedgerError } from '../../../src/ledger/errors.js';
import type { SubmitParams } from '../../../src/ledger/ledger.js';
import {
  drainOutbox,
  expectLedgerError,
  finished,
  freshKey,
  settleOk,
  submitAndGrant,
  submitJob,
  submitParams,
  testConfig,
  workBody,
  workRows,
} from '../testing.js';
import type { Run } from './helpers.js';

export function submitConformance(run: Run): void {
  describe('submit', () => {
    it('submit creates queued@1 with no lease, notBefore = now and the submitted fields', () =>
      run(async ({ ledger, clock }) => {
        clock.advance(1234);
        const now = clock.now();
        const key = freshKey();
        const input = { source: 's3://in.mov', steps: [1, 2, { crop: 'none' }], note: null };
        const res = await ledger.submit({ tenant: 'acme', type: 'transcode', input, requires: ['ffmpeg', 'gpu'], idempotencyKey: key });
        assert.equal(res.created, true);
        const job = res.job;
        assert.equal(typeof job.id, 'string');
        assert.ok(job.id.length > 0, 'the job has an id');
        assert.equal(job.tenant, 'acme');
        assert.equal(job.type, 'transcode');
        assert.deepEqual(job.input, input);
        assert.deepEqual(job.requires, ['ffmpeg', 'gpu']);
        assert.equal(job.idempotencyKey, key);
        assert.equal(job.state, 'queued');
        assert.equal(job.attempt, 1);
        assert.equal(job.maxAttempts, testConfig.defaultMaxAttempts);
        assert.equal(job.notBefore, now);
        assert.equal(job.leaseToken, null);
        assert.equal(job.leaseHolder, null);
        assert.equal(job.leaseDeadline, null);
        assert.equal(job.cancelRequested, false);
        assert.equal(job.progress, null);
        assert.equal(job.result, null);
        assert.equal(job.failureReason, null);
        assert.equal(job.error, null);
        assert.equal(job.createdAt, now);
        assert.equal(job.endedAt, null);
        assert.deepEqual(await ledger.getJob(job.id), job, 'getJob answers what submit returned');
        assert.deepEqual(await ledger.getAttempts(job.id), [], 'no attempt has started');
      }));

    it('submit without requires or idempotency key stores an empty list and a null key', () =>
      run(async ({ ledger }) => {
        const { job } = await ledger.submit({ tenant: 'acme', type: 'transcode', input: {} });
        assert.deepEqual(job.requires, []);
        assert.equal(job.idempotencyKey, null);
      }));

    it('submit takes maxAttempts from the submission, else from the config', () =>
      run(
        async ({ ledger }) => {
          assert.equal((await submitJob(ledger)).maxAttempts, 5);
          assert.equal((await submitJob(ledger, { maxAttempts: 1 })).maxAttempts, 1);
          assert.equal((await submitJob(ledger, { maxAttempts: 9 })).maxAttempts, 9);
        },
        { ...testConfig, defaultMaxAttempts: 5 },
      ));

    it('submit keeps timeoutSeconds with the job (null when not given), and every read answers it', () =>
      run(async ({ ledger }) => {
        const timed = await submitJob(ledger, { timeoutSeconds: 90 });
        assert.equal(timed.timeoutSeconds, 90);
        assert.equal((await ledger.getJob(timed.id))?.timeoutSeconds, 90);
        assert.equal((await submitJob(ledger)).timeoutSeconds, null);
      }));

    it('submit keeps limits with the job (null when not given), and every read answers them', () =>
      run(async ({ ledger }) => {
        const limited = await submitJob(ledger, { limits: { processes: 32, memoryMb: 256 } });
        assert.deepEqual(limited.limits, { memoryMb: 256, processes: 32 });
        assert.deepEqual((await ledger.getJob(limited.id))?.limits, { memoryMb: 256, processes: 32 });
        const memoryOnly = await submitJob(ledger, { limits: { memoryMb: 128 } });
        assert.deepEqual((await ledger.getJob(memoryOnly.id))?.limits, { memoryMb: 128 });
        assert.equal((await submitJob(ledger)).limits, null);
      }));

    it('submit writes exactly one work outbox row {jobId, attempt 1, tenant, type}, due now', () =>
      run(async ({ ledger, clock }) => {
        clock.advance(500);
        const job = await submitJob(ledger);
        const rows = await drainOutbox(ledger);
        assert.equal(rows.length, 1, 'one outbox row');
        const [row] = rows;
        assert.ok(row);
        assert.equal(row.kind, 'work');
        assert.equal(row.jobId, job.id);
        assert.deepEqual(row.body, workBody(job, 1));
        assert.equal(row.availableAt, clock.now());
        assert.equal(row.createdAt, clock.now());
      }));

    it('a repeated idempotency key under the same tenant with the same submission returns the same job unchanged, created:false, and no second work row', () =>
      run(async ({ ledger, clock }) => {
        const key = freshKey();
        const first = await ledger.submit(submitParams({ idempotencyKey: key, input: { v: 1, w: [1, 2] } }));
        clock.advance(5_000);
        // The same JSON value with its keys in another order, and maxAttempts left to the default: the same submission.
        const second = await ledger.submit(submitParams({ idempotencyKey: key, input: { w: [1, 2], v: 1 } }));
        assert.equal(first.created, true);
        assert.equal(second.created, false);
        assert.deepEqual(second.job, first.job, 'the existing job, unchanged');
        assert.equal(workRows(await drainOutbox(ledger)).length, 1, 'one work row for both submissions');
        assert.deepEqual((await ledger.countJobsByState()).queued, 1);
      }));

    it('a repeated idempotency key with another submission is idempotency_conflict naming the key, the job and what differs, and writes nothing', () =>
      run(async ({ ledger }) => {
        const key = freshKey();
        const first = await ledger.submit(submitParams({ idempotencyKey: key, input: { v: 1 }, timeoutSeconds: 60 }));
        const others: Array<[string, Partial<SubmitParams>]> = [
          ['input', { input: { v: 2 } }],
          ['type', { type: 'other' }],
          ['requires', { requires: ['gpu'] }],
          ['maxAttempts', { maxAttempts: 7 }],
          ['timeoutSeconds', { timeoutSeconds: 61 }],
          ['limits', { limits: { processes: 20 } }],
        ];
        for (const [field, change] of others) {
          const again = ledger.submit(submitParams({ idempotencyKey: key, input: { v: 1 }, timeoutSeconds: 60, ...change }));
          await assert.rejects(again, (error: unknown) => {
            assert.ok(error instanceof LedgerError, String(error));
            assert.equal(error.code, 'idempotency_conflict');
            assert.ok(error.message.includes(JSON.stringify(key)) && error.message.includes(first.job.id), error.message);
            assert.match(error.message, new RegExp(`its ${field} differ`));
            return true;
          });
        }
        assert.deepEqual(await ledger.getJob(first.job.id), first.job, 'the job is unchanged');
        assert.equal(workRows(await drainOutbox(ledger)).length, 1, 'one work row');
      }));

    it('a repeated idempotency key returns the job as it is now, even after it finished, and dispatches nothing', () =>
      run(async ({ ledger }) => {
        const key = freshKey();
        const g = await submitAndGrant(ledger, { idempotencyKey: key });
        await settleOk(ledger, g.ref, finished());
        await drainOutbox(ledger);
        const again = await ledger.submit(submitParams({ idempotencyKey: key }));
        assert.equal(again.created, false);
        assert.equal(again.job.id, g.job.id);
        assert.equal(again.job.state, 'finished');
        assert.deepEqual(await drainOutbox(ledger), [], 'no new outbox row');
      }));

    it('the same idempotency key under another tenant is a different job', () =>
      run(async ({ ledger }) => {
        const key = freshKey();
        const a = await ledger.submit(submitParams({ tenant: 'acme', idempotencyKey: key }));
        const b = await ledger.submit(submitParams({ tenant: 'globex', idempotencyKey: key }));
        assert.equal(a.created, true);
        assert.equal(b.created, true);
        assert.notEqual(a.job.id, b.job.id);
        assert.equal(b.job.tenant, 'globex');
        const rows = workRows(await drainOutbox(ledger));
        assert.deepEqual(rows.map((r) => r.jobId).sort(), [a.job.id, b.job.id].sort());
      }));

    it('submissions without an idempotency key are always new jobs', () =>
      run(async ({ ledger }) => {
        const a = await submitJob(ledger);
        const b = await submitJob(ledger);
        assert.notEqual(a.id, b.id);
        assert.equal(workRows(await drainOutbox(ledger)).length, 2);
      }));

    it('submit rejects invalid input with LedgerError invalid_input and writes nothing', () =>
      run(async ({ ledger }) => {
        const circular: Record<string, unknown> = { a: 1 };
        circular.self = circular;
        const cases: Array<[string, SubmitParams]> = [
          ['an empty tenant', submitParams({ tenant: '' })],
          ['a missing tenant', submitParams({ tenant: undefined as unknown as string })],
          ['an empty type', submitParams({ type: '' })],
          ['maxAttempts 0', submitParams({ maxAttempts: 0 })],
          ['maxAttempts -1', submitParams({ maxAttempts: -1 })],
          ['maxAttempts 1.5', submitParams({ maxAttempts: 1.5 })],
          ['maxAttempts NaN', submitParams({ maxAttempts: Number.NaN })],
          ['timeoutSeconds 0', submitParams({ timeoutSeconds: 0 })],
          ['timeoutSeconds 2.5', submitParams({ timeoutSeconds: 2.5 })],
          ['timeoutSeconds as a string', submitParams({ timeoutSeconds: '60' as unknown as number })],
          ['empty limits', submitParams({ limits: {} })],
          ['limits of an unknown kind', submitParams({ limits: { cpu: 2 } as unknown as SubmitParams['limits'] })],
          ['limits.memoryMb 1.5', submitParams({ limits: { memoryMb: 1.5 } })],
          ['limits.processes 0', submitParams({ limits: { processes: 0 } })],
          ['limits as a list', submitParams({ limits: [64] as unknown as SubmitParams['limits'] })],
          ['an input holding a BigInt', submitParams({ input: { frames: 10n } })],
          ['a circular input', submitParams({ input: circular })],
          ['requires as a string', submitParams({ requires: 'gpu' as unknown as string[] })],
          ['requires holding a number', submitParams({ requires: [1] as unknown as string[] })],
          ['requires holding null', submitParams({ requires: ['gpu', null] as unknown as string[] })],
        ];
        for (const [what, params] of cases) {
          await expectLedgerError(ledger.submit(params), 'invalid_input', `submit with ${what}`);
        }
        assert.deepEqual(await ledger.countJobsByState(), { queued: 0, running: 0, finished: 0, failed: 0 });
        assert.equal((await ledger.outboxStats()).unsent, 0, 'no outbox row');
      }));

    it('submitMany answers in order; a key repeated within the batch names the same job', () =>
      run(async ({ ledger }) => {
        const k1 = freshKey();
        const k2 = freshKey();
        const res = await ledger.submitMany([
          submitParams({ idempotencyKey: k1, type: 'a' }),
          submitParams({ type: 'b' }),
          submitParams({ idempotencyKey: k1, type: 'a' }),
          submitParams({ idempotencyKey: k2, type: 'c', tenant: 'globex' }),
        ]);
        assert.equal(res.length, 4);
        const [r0, r1, r2, r3] = res;
        assert.ok(r0 && r1 && r2 && r3);
        assert.deepEqual(
          res.map((r) => [r.created, r.job.type, r.job.tenant]),
          [
            [true, 'a', 'acme'],
            [true, 'b', 'acme'],
            [false, 'a', 'acme'],
            [true, 'c', 'globex'],
          ],
        );
        assert.equal(r2.job.id, r0.job.id, 'the repeated key names the first job');
        assert.equal(new Set(res.map((r) => r.job.id)).size, 3);
        for (const r of [r0, r1, r3]) assert.deepEqual(await ledger.getJob(r.job.id), r.job);
        const rows = workRows(await drainOutbox(ledger));
        assert.deepEqual(rows.map((r) => r.jobId).sort(), [r0.job.id, r1.job.id, r3.job.id].sort(), 'one work row per new job');
        for (const r of rows) assert.equal(r.body.attempt, 1);
      }));

    it('submitMany returns an existing job for a known key, created:false, with no new row', () =>
      run(async ({ ledger }) => {
        const key = freshKey();
        const existing = await submitJob(ledger, { idempotencyKey: key });
        await drainOutbox(ledger);
        const [res] = await ledger.submitMany([submitParams({ idempotencyKey: key })]);
        assert.ok(res);
        assert.equal(res.created, false);
        assert.deepEqual(res.job, existing);
        assert.deepEqual(await drainOutbox(ledger), []);
      }));

    it('submitMany with one invalid submission throws invalid_input and writes none of the batch', () =>
      run(async ({ ledger }) => {
        await expectLedgerError(
          ledger.submitMany([submitParams({ idempotencyKey: freshKey() }), submitParams({ type: '' }), submitParams()]),
          'invalid_input',
          'submitMany with an empty type in the middle',
        );
        assert.deepEqual(await ledger.countJobsByState(), { queued: 0, running: 0, finished: 0, failed: 0 });
        assert.equal((await ledger.outboxStats()).unsent, 0);
      }));

    it('submitMany of nothing answers nothing', () =>
      run(async ({ ledger }) => {
        assert.deepEqual(await ledger.submitMany([]), []);
      }));
  });
}
