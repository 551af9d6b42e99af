/** Ledger conformance: settle, the end of an attempt (finished, failed, retried): one wins per attempt. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  assertResultBody,
  drainOutbox,
  errors,
  expectAccepted,
  expectGranted,
  failed,
  finished,
  freshKey,
  grant,
  resultRows,
  settleOk,
  snapshot,
  submitAndGrant,
  submitJob,
  testConfig,
  workBody,
  workRows,
} from '../testing.js';
import { TTL, BASE, reachAttempt2, type Run } from './helpers.js';

export function settleConformance(run: Run): void {
  describe('settle', () => {
    it('a finished settle stores the result, ends the job and writes one result row', () =>
      run(async ({ ledger, clock }) => {
        const key = freshKey();
        const g = await submitAndGrant(ledger, { idempotencyKey: key }, 'w1');
        await drainOutbox(ledger);
        clock.advance(10_000);
        const outcome = finished({ frames: 240 });
        const res = await settleOk(ledger, g.ref, outcome, 'finish');
        const job = res.job;
        assert.equal(job.state, 'finished');
        assert.equal(job.attempt, 1);
        assert.deepEqual(job.result, outcome.kind === 'finished' ? outcome.result : undefined);
        assert.equal(job.endedAt, clock.now());
        assert.equal(job.failureReason, null);
        assert.equal(job.error, null);
        assert.deepEqual(await ledger.getJob(g.job.id), job);
        const rows = await drainOutbox(ledger);
        assert.equal(rows.length, 1, 'exactly one outbox row');
        const [row] = resultRows(rows, g.job.id);
        assert.ok(row, 'a result row');
        assertResultBody(row.body, job);
        assert.equal(row.body.idempotencyKey, key);
        assert.equal(row.body.state, 'finished');
        assert.deepEqual(row.body.result, job.result);
        const [attempt] = await ledger.getAttempts(g.job.id);
        assert.ok(attempt);
        assert.equal(attempt.endedAt, clock.now());
        assert.equal(attempt.outcome, 'finished');
      }));

    it('a permanent error fails the job once with reason permanent and one result row', () =>
      run(async ({ ledger, clock }) => {
        const g = await submitAndGrant(ledger, { maxAttempts: 3 });
        await drainOutbox(ledger);
        clock.advance(1_000);
        const res = await settleOk(ledger, g.ref, failed(errors.permanent), 'fail_permanent');
        assert.equal(res.job.state, 'failed');
        assert.equal(res.job.failureReason, 'permanent');
        assert.deepEqual(res.job.error, errors.permanent);
        assert.equal(res.job.endedAt, clock.now());
        assert.equal(res.job.attempt, 1, 'no retry although attempts were left');
        assert.deepEqual(await ledger.getJob(g.job.id), res.job);
        const rows = await drainOutbox(ledger);
        assert.equal(rows.length, 1);
        const [row] = resultRows(rows);
        assert.ok(row);
        assertResultBody(row.body, res.job);
        assert.equal(row.body.state, 'failed');
        assert.deepEqual(row.body.error, errors.permanent);
        assert.deepEqual(
          (await ledger.getAttempts(g.job.id)).map((a) => [a.attempt, a.outcome, a.endedAt]),
          [[1, 'failed', clock.now()]],
        );
      }));

    it('a transient error with attempts left requeues at attempt n+1 after the backoff, with no result row', () =>
      run(async ({ ledger, clock }) => {
        const g = await submitAndGrant(ledger, { maxAttempts: 3 });
        await drainOutbox(ledger);
        clock.advance(1_000);
        const settledAt = clock.now();
        const res = await settleOk(ledger, g.ref, failed(errors.transient), 'retry');
        assert.equal(res.job.state, 'queued');
        assert.equal(res.job.attempt, 2);
        assert.equal(res.job.notBefore, settledAt + BASE);
        assert.equal(res.job.failureReason, null);
        assert.equal(res.job.endedAt, null);
        assert.deepEqual(await ledger.getJob(g.job.id), res.job);
        assert.deepEqual(
          (await ledger.getAttempts(g.job.id)).map((a) => [a.attempt, a.outcome, a.endedAt]),
          [[1, 'retried', settledAt]],
        );
        assert.deepEqual(await drainOutbox(ledger), [], 'no result row and no work row before notBefore');
      }));

    it('the work row for the retry becomes due exactly at notBefore', () =>
      run(async ({ ledger, clock }) => {
        const g = await submitAndGrant(ledger);
        await drainOutbox(ledger);
        const res = await settleOk(ledger, g.ref, failed(errors.transient), 'retry');
        clock.advance(BASE - 1);
        assert.deepEqual(await ledger.outboxTake(100), [], '1 ms before notBefore');
        clock.advance(1);
        const rows = await drainOutbox(ledger);
        assert.equal(rows.length, 1);
        const [row] = workRows(rows);
        assert.ok(row);
        assert.deepEqual(row.body, workBody(res.job, 2));
        assert.equal(row.availableAt, res.job.notBefore);
        expectGranted(await ledger.grantLease({ jobId: row.body.jobId, attempt: row.body.attempt, worker: 'w2' }));
      }));

    it('with the default config: lease TTL 90 s, 3 attempts, transient backoff 2 s, 4 s, 8 s', () =>
      run(async ({ ledger, clock }) => {
        assert.equal((await submitJob(ledger)).maxAttempts, 3);
        const job = await submitJob(ledger, { maxAttempts: 4 });
        const backoffs: number[] = [];
        for (let attempt = 1; attempt <= 3; attempt++) {
          const g = expectGranted(await ledger.grantLease({ jobId: job.id, attempt, worker: 'w1' }));
          assert.equal(g.deadline, clock.now() + 90_000);
          const res = await settleOk(ledger, { jobId: job.id, attempt, token: g.token }, failed(errors.transient), 'retry');
          backoffs.push(res.job.notBefore - clock.now());
          clock.set(res.job.notBefore);
        }
        assert.deepEqual(backoffs, [2_000, 4_000, 8_000]);
        const last = expectGranted(await ledger.grantLease({ jobId: job.id, attempt: 4, worker: 'w1' }));
        const res = await settleOk(ledger, { jobId: job.id, attempt: 4, token: last.token }, failed(errors.transient), 'exhaust');
        assert.equal(res.job.failureReason, 'exhausted');
      }, undefined));

    it('the backoff is capped at backoffMaxMs', () =>
      run(
        async ({ ledger, clock }) => {
          const job = await submitJob(ledger, { maxAttempts: 3 });
          const g1 = await grant(ledger, job.id);
          const r1 = await settleOk(ledger, g1.ref, failed(errors.transient), 'retry');
          assert.equal(r1.job.notBefore - clock.now(), 2_000);
          clock.set(r1.job.notBefore);
          const g2 = await grant(ledger, job.id);
          const r2 = await settleOk(ledger, g2.ref, failed(errors.transient), 'retry');
          assert.equal(r2.job.notBefore - clock.now(), 3_000, 'min(4 s, cap 3 s)');
        },
        { ...testConfig, backoffBaseMs: 2_000, backoffMaxMs: 3_000 },
      ));

    it('a transient error on the last attempt exhausts the job with the error and one result row', () =>
      run(async (h) => {
        const { ledger, clock } = h;
        const { first, second } = await reachAttempt2(h, { maxAttempts: 2 });
        await drainOutbox(ledger);
        clock.advance(500);
        const res = await settleOk(ledger, second.ref, failed(errors.transient), 'exhaust');
        assert.equal(res.job.state, 'failed');
        assert.equal(res.job.failureReason, 'exhausted');
        assert.deepEqual(res.job.error, errors.transient);
        assert.equal(res.job.attempt, 2);
        assert.equal(res.job.endedAt, clock.now());
        const rows = await drainOutbox(ledger);
        assert.equal(rows.length, 1, 'one result row and no work row');
        const [row] = resultRows(rows, first.job.id);
        assert.ok(row);
        assertResultBody(row.body, res.job);
        assert.deepEqual(
          (await ledger.getAttempts(first.job.id)).map((a) => [a.attempt, a.worker, a.outcome]),
          [
            [1, 'worker-1', 'retried'],
            [2, 'worker-2', 'failed'],
          ],
        );
      }));

    it('a transient error with maxAttempts 1 exhausts at once', () =>
      run(async ({ ledger }) => {
        const g = await submitAndGrant(ledger, { maxAttempts: 1 });
        const res = await settleOk(ledger, g.ref, failed(errors.transient), 'exhaust');
        assert.equal(res.job.failureReason, 'exhausted');
      }));

    it('a fatal error settles like a transient one: retry while attempts are left, then exhausted', () =>
      run(async ({ ledger, clock }) => {
        const g1 = await submitAndGrant(ledger, { maxAttempts: 2 });
        const r1 = await settleOk(ledger, g1.ref, failed(errors.fatal), 'retry');
        assert.equal(r1.job.state, 'queued');
        assert.equal(r1.job.attempt, 2);
        assert.equal(r1.job.notBefore, clock.now() + BASE);
        clock.advance(BASE);
        const g2 = await grant(ledger, g1.job.id, 'w2');
        const r2 = await settleOk(ledger, g2.ref, failed(errors.fatal), 'exhaust');
        assert.equal(r2.job.state, 'failed');
        assert.equal(r2.job.failureReason, 'exhausted');
        assert.deepEqual(r2.job.error, errors.fatal);
      }));

    it('after a cancel request, any failure (permanent, transient, fatal) ends the job as failed/cancelled', () =>
      run(async ({ ledger }) => {
        for (const error of [errors.permanent, errors.transient, errors.fatal]) {
          const g = await submitAndGrant(ledger, { maxAttempts: 3 });
          await drainOutbox(ledger);
          assert.equal((await ledger.cancel({ jobId: g.job.id, tenant: 'acme' })).outcome, 'cancel_requested');
          const res = await settleOk(ledger, g.ref, failed(error), 'cancel_running');
          assert.equal(res.job.state, 'failed', `${error.class}: state`);
          assert.equal(res.job.failureReason, 'cancelled', `${error.class}: reason`);
          assert.equal(res.job.attempt, 1, `${error.class}: not retried`);
          const rows = await drainOutbox(ledger);
          assert.equal(rows.length, 1, `${error.class}: one result row`);
          const [row] = resultRows(rows, g.job.id);
          assert.ok(row);
          assert.equal(row.body.state, 'failed');
          assert.deepEqual(
            (await ledger.getAttempts(g.job.id)).map((a) => a.outcome),
            ['cancelled'],
          );
        }
      }));

    it('after a cancel request, a finished result is still accepted as finished', () =>
      run(async ({ ledger }) => {
        const g = await submitAndGrant(ledger);
        await ledger.cancel({ jobId: g.job.id });
        const res = await settleOk(ledger, g.ref, finished(), 'finish');
        assert.equal(res.job.state, 'finished');
        assert.equal(resultRows(await drainOutbox(ledger), g.job.id).length, 1);
      }));

    it('a stale attempt loses the settle race: attempt 1 is refused as superseded once attempt 2 was granted, and nothing changes', () =>
      run(async ({ ledger, clock }) => {
        const g1 = await submitAndGrant(ledger, {}, 'w1');
        clock.advance(TTL);
        const report = await ledger.sweep();
        assert.deepEqual(
          report.requeued.map((r) => r.jobId),
          [g1.job.id],
        );
        clock.advance(BASE);
        const g2 = await grant(ledger, g1.job.id, 'w2');
        await drainOutbox(ledger);
        const before = await snapshot(ledger, [g1.job.id]);
        for (const outcome of [finished({ stale: true }), failed(errors.permanent), failed(errors.transient)]) {
          assert.deepEqual(await ledger.settle({ ...g1.ref, outcome }), { accepted: false, reason: 'superseded' }, outcome.kind);
        }
        assert.deepEqual(await snapshot(ledger, [g1.job.id]), before, 'the stale settle changed nothing');
        assert.deepEqual(await drainOutbox(ledger), [], 'the stale settle wrote no outbox row');
        const res = await settleOk(ledger, g2.ref, finished({ fresh: true }), 'finish');
        assert.deepEqual(res.job.result?.data, { fresh: true });
      }));

    it('a settle with a wrong token is refused as superseded and changes nothing', () =>
      run(async ({ ledger }) => {
        const g = await submitAndGrant(ledger);
        await drainOutbox(ledger);
        const before = await snapshot(ledger, [g.job.id]);
        assert.deepEqual(await ledger.settle({ ...g.ref, token: 'forged', outcome: finished() }), { accepted: false, reason: 'superseded' });
        assert.deepEqual(await snapshot(ledger, [g.job.id]), before);
        assert.deepEqual(await drainOutbox(ledger), []);
        await settleOk(ledger, g.ref, finished(), 'finish');
      }));

    it('a settle naming another tenant is refused as unknown_job and changes nothing; naming its own, accepted', () =>
      run(async ({ ledger }) => {
        const g = await submitAndGrant(ledger, { tenant: 'acme' });
        await drainOutbox(ledger);
        const before = await snapshot(ledger, [g.job.id]);
        assert.deepEqual(await ledger.settle({ ...g.ref, tenant: 'globex', outcome: finished() }), { accepted: false, reason: 'unknown_job' });
        assert.deepEqual(await snapshot(ledger, [g.job.id]), before);
        assert.deepEqual(await drainOutbox(ledger), []);
        expectAccepted(await ledger.settle({ ...g.ref, tenant: 'acme', outcome: finished() }), 'finish');
      }));

    it('a settle after the lease deadline is refused as expired, even before the sweeper runs, and changes nothing', () =>
      run(async ({ ledger, clock }) => {
        const g = await submitAndGrant(ledger);
        await drainOutbox(ledger);
        clock.advance(TTL);
        const before = await snapshot(ledger, [g.job.id]);
        for (const outcome of [finished(), failed(errors.permanent), failed(errors.transient)]) {
          assert.deepEqual(await ledger.settle({ ...g.ref, outcome }), { accepted: false, reason: 'expired' }, outcome.kind);
        }
        assert.deepEqual(await snapshot(ledger, [g.job.id]), before);
        assert.deepEqual(await drainOutbox(ledger), []);
        assert.deepEqual(
          (await ledger.sweep()).requeued.map((r) => r.jobId),
          [g.job.id],
          'the sweeper still requeues it',
        );
      }));

    it('a settle 1 ms before the lease deadline is accepted', () =>
      run(async ({ ledger, clock }) => {
        const g = await submitAndGrant(ledger);
        clock.advance(TTL - 1);
        await settleOk(ledger, g.ref, finished(), 'finish');
      }));

    it('a second settle of a settled attempt is refused and changes nothing', () =>
      run(async ({ ledger }) => {
        const g = await submitAndGrant(ledger);
        await settleOk(ledger, g.ref, finished({ n: 1 }), 'finish');
        const before = await snapshot(ledger, [g.job.id]);
        assert.deepEqual(await ledger.settle({ ...g.ref, outcome: finished({ n: 2 }) }), { accepted: false, reason: 'ended' });
        assert.deepEqual(await ledger.settle({ ...g.ref, outcome: failed(errors.permanent) }), { accepted: false, reason: 'ended' });
        assert.deepEqual(await snapshot(ledger, [g.job.id]), before);
        assert.equal(resultRows(await drainOutbox(ledger), g.job.id).length, 1, 'still one result row');
      }));

    it('a settle of an attempt that was already retried is refused as superseded and changes nothing', () =>
      run(async ({ ledger }) => {
        const g = await submitAndGrant(ledger);
        await settleOk(ledger, g.ref, failed(errors.transient), 'retry');
        const before = await snapshot(ledger, [g.job.id]);
        assert.deepEqual(await ledger.settle({ ...g.ref, outcome: finished() }), { accepted: false, reason: 'superseded' });
        assert.deepEqual(await ledger.settle({ ...g.ref, outcome: failed(errors.transient) }), { accepted: false, reason: 'superseded' });
        assert.deepEqual(await snapshot(ledger, [g.job.id]), before);
      }));

    it('concurrent settles of one attempt: exactly one wins and one result row is written', () =>
      run(async ({ ledger }) => {
        const g = await submitAndGrant(ledger);
        await drainOutbox(ledger);
        const outcomes = [finished({ by: 'a' }), finished({ by: 'b' }), failed(errors.permanent), failed(errors.transient)];
        const results = await Promise.all(outcomes.map((outcome) => ledger.settle({ ...g.ref, outcome })));
        const winners = results.filter((r) => r.accepted);
        assert.equal(winners.length, 1, `exactly one settle wins, got ${JSON.stringify(results.map((r) => r.accepted))}`);
        const [winner] = winners;
        assert.ok(winner && winner.accepted);
        for (const r of results) if (!r.accepted) assert.ok(['ended', 'superseded'].includes(r.reason), r.reason);
        assert.deepEqual(await ledger.getJob(g.job.id), winner.job);
        const rows = await drainOutbox(ledger);
        const expectedResultRows = winner.transition === 'retry' ? 0 : 1;
        assert.equal(resultRows(rows).length, expectedResultRows);
        assert.equal((await ledger.getAttempts(g.job.id)).filter((a) => a.endedAt !== null).length, 1);
      }));

    it('a settle for an unknown job is refused as unknown_job', () =>
      run(async ({ ledger }) => {
        assert.deepEqual(await ledger.settle({ jobId: 'no-such-job', attempt: 1, token: 't', outcome: finished() }), {
          accepted: false,
          reason: 'unknown_job',
        });
      }));
  });
}
