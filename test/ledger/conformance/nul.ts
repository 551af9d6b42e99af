/** Ledger conformance: NUL characters, refused in names and replaced in free text by every driver. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { LedgerError } from '../../../src/ledger/errors.js';
import type { SubmitParams } from '../../../src/ledger/ledger.js';
import {
  assertResultBody,
  drainOutbox,
  errors,
  expectGranted,
  failed,
  finished,
  grant,
  mustGetJob,
  resultRows,
  settleOk,
  snapshot,
  submitAndGrant,
  submitJob,
  submitParams,
} from '../testing.js';
import { BASE, type Run } from './helpers.js';

export function nulConformance(run: Run): void {
  describe('NUL characters (PostgreSQL cannot keep them in a text column, so no driver does)', () => {
    const NUL = '\u0000';
    const REPLACED = '\uFFFD';

    /** Asserts that `promise` rejects with LedgerError invalid_input whose message names `field`. */
    async function expectInvalidNaming(promise: Promise<unknown>, field: string, what: string): Promise<void> {
      await assert.rejects(
        promise,
        (err: unknown) => {
          assert.ok(err instanceof LedgerError, `${what}: expected a LedgerError, got ${String(err)}`);
          assert.equal(err.code, 'invalid_input', `${what}: LedgerError code`);
          assert.ok(err.message.includes(field), `${what}: "${err.message}" should name ${field}`);
          return true;
        },
        `${what} should throw invalid_input naming ${field}`,
      );
    }

    it('submit and submitMany refuse a NUL in tenant, type or idempotencyKey, naming the field, and write nothing', () =>
      run(async ({ ledger }) => {
        const cases: Array<[string, SubmitParams]> = [
          ['tenant', submitParams({ tenant: `ac${NUL}me` })],
          ['type', submitParams({ type: `trans${NUL}code` })],
          ['idempotencyKey', submitParams({ idempotencyKey: `key${NUL}1` })],
        ];
        for (const [field, params] of cases) {
          await expectInvalidNaming(ledger.submit(params), field, `submit with a NUL in ${field}`);
          await expectInvalidNaming(ledger.submitMany([submitParams(), params]), field, `submitMany with a NUL in ${field}`);
        }
        assert.deepEqual(await ledger.countJobsByState(), { queued: 0, running: 0, finished: 0, failed: 0 });
        assert.equal((await ledger.outboxStats()).unsent, 0, 'no outbox row');
      }));

    it('JSON values keep a NUL as given: input, requires and a result round-trip', () =>
      run(async ({ ledger }) => {
        const g = await submitAndGrant(ledger, { input: { text: `a${NUL}b` }, requires: [`gp${NUL}u`] });
        assert.deepEqual(g.job.input, { text: `a${NUL}b` });
        assert.deepEqual(g.job.requires, [`gp${NUL}u`]);
        const res = await settleOk(ledger, g.ref, finished({ log: `frame${NUL}240` }), 'finish');
        assert.deepEqual(res.job.result?.data, { log: `frame${NUL}240` });
        assert.deepEqual(await ledger.getJob(g.job.id), res.job);
        const [row] = resultRows(await drainOutbox(ledger), g.job.id);
        assert.ok(row, 'a result row');
        assertResultBody(row.body, res.job);
      }));

    it('grantLease refuses a NUL in the worker id, naming it, and changes nothing', () =>
      run(async ({ ledger }) => {
        const job = await submitJob(ledger);
        await drainOutbox(ledger);
        const before = await snapshot(ledger, [job.id]);
        await expectInvalidNaming(ledger.grantLease({ jobId: job.id, attempt: 1, worker: `w${NUL}1` }), 'worker', 'a grant to a worker id with a NUL');
        assert.deepEqual(await snapshot(ledger, [job.id]), before);
        expectGranted(await ledger.grantLease({ jobId: job.id, attempt: 1, worker: 'w1' }), 'the grant afterwards');
      }));

    it('settle refuses a NUL in the error code, naming it; nothing changes and the lease stays live', () =>
      run(async ({ ledger }) => {
        const g = await submitAndGrant(ledger);
        await drainOutbox(ledger);
        const before = await snapshot(ledger, [g.job.id]);
        for (const error of [errors.permanent, errors.transient, errors.fatal]) {
          await expectInvalidNaming(
            ledger.settle({ ...g.ref, outcome: failed({ ...error, code: `bad${NUL}code` }) }),
            'error code',
            `a ${error.class} settle with a NUL in its code`,
          );
        }
        assert.deepEqual(await snapshot(ledger, [g.job.id]), before);
        assert.deepEqual(await drainOutbox(ledger), []);
        assert.equal((await ledger.checkLease(g.ref)).live, true);
      }));

    it("a settle is never refused for a NUL in the worker's error message: each NUL is replaced, in the job, its history and its message", () =>
      run(async ({ ledger }) => {
        const message = `ffmpeg said${NUL}: bad${NUL}${NUL} frame`;
        const recorded = { ...errors.permanent, message: `ffmpeg said${REPLACED}: bad${REPLACED}${REPLACED} frame` };
        const g = await submitAndGrant(ledger);
        await drainOutbox(ledger);
        const res = await settleOk(ledger, g.ref, failed({ ...errors.permanent, message }), 'fail_permanent');
        assert.deepEqual(res.job.error, recorded);
        assert.deepEqual(await ledger.getJob(g.job.id), res.job);
        assert.deepEqual(
          (await ledger.getAttempts(g.job.id)).map((a) => a.error),
          [recorded],
        );
        const rows = await drainOutbox(ledger);
        assert.equal(rows.length, 1, 'one result row');
        const [row] = resultRows(rows, g.job.id);
        assert.ok(row, 'a result row');
        assertResultBody(row.body, res.job);
        assert.deepEqual(row.body.error, recorded);
      }));

    it('a transient error message with NULs is replaced alike on retry and on exhaust', () =>
      run(async ({ ledger, clock }) => {
        const recorded = { ...errors.transient, message: `storage${REPLACED}answered 503` };
        const first = await submitAndGrant(ledger, { maxAttempts: 2 });
        const failure = failed({ ...errors.transient, message: `storage${NUL}answered 503` });
        await settleOk(ledger, first.ref, failure, 'retry');
        clock.advance(BASE);
        const second = await grant(ledger, first.job.id);
        const res = await settleOk(ledger, second.ref, failure, 'exhaust');
        assert.equal(res.job.failureReason, 'exhausted');
        assert.deepEqual(res.job.error, recorded);
        assert.deepEqual(
          (await ledger.getAttempts(first.job.id)).map((a) => [a.outcome, a.error]),
          [
            ['retried', recorded],
            ['failed', recorded],
          ],
        );
      }));

    it('recordProgress replaces each NUL of a progress message (job code wrote it)', () =>
      run(async ({ ledger }) => {
        const g = await submitAndGrant(ledger);
        assert.deepEqual(await ledger.recordProgress({ ...g.ref, fraction: 0.5, message: `step${NUL}2` }), { accepted: true });
        const job = await mustGetJob(ledger, g.job.id);
        assert.equal(job.progress, 0.5);
        assert.equal(job.progressMessage, `step${REPLACED}2`);
      }));

    it('reject refuses a NUL in the error code and replaces each NUL of the message', () =>
      run(async ({ ledger }) => {
        const job = await submitJob(ledger, { requires: [`gp${NUL}u`] });
        await drainOutbox(ledger);
        const before = await snapshot(ledger, [job.id]);
        await expectInvalidNaming(
          ledger.reject({ jobId: job.id, error: { ...errors.unroutable, code: `no${NUL}worker` } }),
          'error code',
          'a reject with a NUL in its code',
        );
        assert.deepEqual(await snapshot(ledger, [job.id]), before);
        const res = await ledger.reject({ jobId: job.id, error: { ...errors.unroutable, message: `no worker offers capability gp${NUL}u` } });
        assert.ok(res.rejected, `the reject should succeed, got ${JSON.stringify(res)}`);
        assert.deepEqual(res.job.error, { ...errors.unroutable, message: `no worker offers capability gp${REPLACED}u` });
        assert.deepEqual(await ledger.getJob(job.id), res.job);
        const [row] = resultRows(await drainOutbox(ledger), job.id);
        assert.ok(row, 'a result row');
        assertResultBody(row.body, res.job);
      }));

    it('listJobs refuses a NUL in its tenant or type filter, naming it', () =>
      run(async ({ ledger }) => {
        await submitJob(ledger);
        await expectInvalidNaming(ledger.listJobs({ tenant: `ac${NUL}me` }), 'tenant', 'a listing by a tenant with a NUL');
        await expectInvalidNaming(ledger.listJobs({ type: `trans${NUL}code` }), 'type', 'a listing by a type with a NUL');
      }));
  });
}
