/** Ledger conformance: sweep: expired leases (requeued, exhausted, cancelled) and the redispatch of unleased work. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  assertResultBody,
  drainOutbox,
  errors,
  expectGranted,
  failed,
  finished,
  mustGetJob,
  resultRows,
  settleOk,
  snapshot,
  submitAndGrant,
  submitJob,
  testConfig,
  workBody,
  workRows,
} from '../testing.js';
import { TTL, BASE, emptySweep, type Run } from './helpers.js';

export function sweepConformance(run: Run): void {
  describe('sweep', () => {
    it('sweep requeues an expired lease at attempt n+1 after the backoff and records the attempt as expired', () =>
      run(async ({ ledger, clock }) => {
        const g = await submitAndGrant(ledger, { maxAttempts: 3 }, 'w1');
        await drainOutbox(ledger);
        clock.advance(TTL);
        const report = await ledger.sweep();
        assert.deepEqual(
          report.requeued.map((r) => r.jobId),
          [g.job.id],
        );
        assert.deepEqual([report.exhausted, report.cancelled, report.redispatched], [[], [], []]);
        const job = await mustGetJob(ledger, g.job.id);
        assert.equal(job.state, 'queued');
        assert.equal(job.attempt, 2);
        assert.equal(job.notBefore, clock.now() + BASE);
        assert.deepEqual(
          (await ledger.getAttempts(g.job.id)).map((a) => [a.attempt, a.outcome, a.endedAt]),
          [[1, 'expired', clock.now()]],
        );
        assert.deepEqual(await drainOutbox(ledger), [], 'the next work row waits for the backoff');
        clock.advance(BASE);
        const rows = await drainOutbox(ledger);
        assert.deepEqual(
          workRows(rows).map((r) => r.body),
          [workBody(job, 2)],
        );
        assert.equal(rows.length, 1);
        expectGranted(await ledger.grantLease({ jobId: g.job.id, attempt: 2, worker: 'w2' }));
      }));

    it('sweep leaves a lease alone until its deadline', () =>
      run(async ({ ledger, clock }) => {
        const g = await submitAndGrant(ledger);
        await drainOutbox(ledger);
        clock.advance(TTL - 1);
        const before = await snapshot(ledger, [g.job.id]);
        assert.deepEqual(await ledger.sweep(), emptySweep);
        assert.deepEqual(await snapshot(ledger, [g.job.id]), before);
        assert.deepEqual(await ledger.checkLease(g.ref), { live: true, deadline: g.deadline });
      }));

    it('sweep fails an expired lease with no attempts left as exhausted, with one result row', () =>
      run(async ({ ledger, clock }) => {
        const g = await submitAndGrant(ledger, { maxAttempts: 1 });
        await drainOutbox(ledger);
        clock.advance(TTL);
        const report = await ledger.sweep();
        assert.deepEqual(report, { ...emptySweep, exhausted: [g.job.id] });
        const job = await mustGetJob(ledger, g.job.id);
        assert.equal(job.state, 'failed');
        assert.equal(job.failureReason, 'exhausted');
        assert.equal(job.endedAt, clock.now());
        const rows = await drainOutbox(ledger);
        assert.equal(rows.length, 1);
        const [row] = resultRows(rows, g.job.id);
        assert.ok(row);
        assertResultBody(row.body, job);
        const [attempt] = await ledger.getAttempts(g.job.id);
        assert.equal(attempt?.endedAt, clock.now());
      }));

    it('sweep fails an expired, cancel-requested lease as cancelled, with one result row', () =>
      run(async ({ ledger, clock }) => {
        const g = await submitAndGrant(ledger, { maxAttempts: 3 });
        await ledger.cancel({ jobId: g.job.id });
        await drainOutbox(ledger);
        clock.advance(TTL);
        const report = await ledger.sweep();
        assert.deepEqual(report, { ...emptySweep, cancelled: [g.job.id] });
        const job = await mustGetJob(ledger, g.job.id);
        assert.equal(job.state, 'failed');
        assert.equal(job.failureReason, 'cancelled');
        const rows = await drainOutbox(ledger);
        assert.equal(rows.length, 1);
        const [row] = resultRows(rows, g.job.id);
        assert.ok(row);
        assertResultBody(row.body, job);
      }));

    it('sweep re-dispatches a queued job whose work message went unleased for redispatchAfterMs, once per period', () =>
      run(
        async ({ ledger, clock }) => {
          const R = 60_000;
          const job = await submitJob(ledger);
          await drainOutbox(ledger);
          const t0 = clock.now();
          clock.set(t0 + R - 1);
          assert.deepEqual(await ledger.sweep(), emptySweep, 'not yet: 1 ms short of redispatchAfterMs');
          clock.set(t0 + R + 1);
          assert.deepEqual(await ledger.sweep(), { ...emptySweep, redispatched: [job.id] });
          const rows = await drainOutbox(ledger);
          assert.deepEqual(
            rows.map((r) => [r.kind, r.body]),
            [['work', workBody(job, 1)]],
          );
          assert.deepEqual(await ledger.sweep(), emptySweep, 'not twice in one period');
          clock.set(t0 + 2 * R);
          assert.deepEqual(await ledger.sweep(), emptySweep, 'the period restarts at the redispatch');
          clock.set(t0 + 2 * R + 2);
          assert.deepEqual(await ledger.sweep(), { ...emptySweep, redispatched: [job.id] }, 'again after another period');
          assert.equal(workRows(await drainOutbox(ledger), job.id).length, 1);
          expectGranted(await ledger.grantLease({ jobId: job.id, attempt: 1, worker: 'w1' }));
          clock.advance(10 * R);
          const after = await ledger.sweep();
          assert.deepEqual(after.redispatched, [], 'a leased job is not redispatched');
        },
        { ...testConfig, redispatchAfterMs: 60_000 },
      ));

    it('sweep with redispatchTypes sends work again only for those types; for the others the period restarts', () =>
      run(
        async ({ ledger, clock }) => {
          const R = 60_000;
          const render = await submitJob(ledger, { type: 'render' });
          const transcode = await submitJob(ledger, { type: 'transcode' });
          await drainOutbox(ledger);
          const t0 = clock.now();
          clock.set(t0 + R + 1);
          assert.deepEqual(await ledger.sweep({ redispatchTypes: ['render'] }), { ...emptySweep, redispatched: [render.id] });
          assert.deepEqual(
            (await drainOutbox(ledger)).map((r) => [r.kind, r.body]),
            [['work', workBody(render, 1)]],
            'only the render job got its work message again',
          );
          assert.deepEqual(await ledger.sweep(), emptySweep, "the transcode job's period restarted at that pass, though it was not sent");
          clock.set(t0 + 2 * R + 2);
          assert.deepEqual(await ledger.sweep({ redispatchTypes: [] }), emptySweep, 'no type: nothing is sent');
          assert.deepEqual(await drainOutbox(ledger), []);
          clock.set(t0 + 3 * R + 3);
          const report = await ledger.sweep({ redispatchTypes: ['transcode', 'render'] });
          assert.deepEqual([...report.redispatched].sort(), [render.id, transcode.id].sort());
        },
        { ...testConfig, redispatchAfterMs: 60_000 },
      ));

    it('a job waiting out its backoff is not redispatched; the period counts from notBefore', () =>
      run(
        async ({ ledger, clock }) => {
          const g = await submitAndGrant(ledger, { maxAttempts: 2 });
          await drainOutbox(ledger);
          const res = await settleOk(ledger, g.ref, failed(errors.transient), 'retry');
          assert.equal(res.job.notBefore, clock.now() + 100_000);
          clock.advance(50_000);
          assert.deepEqual((await ledger.sweep()).redispatched, [], 'in its backoff');
          clock.set(res.job.notBefore);
          // The relay sends the retry's work message as soon as it is due.
          assert.deepEqual(
            workRows(await drainOutbox(ledger), g.job.id).map((r) => r.body),
            [workBody(res.job, 2)],
          );
          clock.set(res.job.notBefore + 500);
          assert.deepEqual((await ledger.sweep()).redispatched, [], 'due for less than redispatchAfterMs');
          clock.set(res.job.notBefore + 1_001);
          assert.deepEqual((await ledger.sweep()).redispatched, [g.job.id], 'unleased for redispatchAfterMs since notBefore');
          const rows = await drainOutbox(ledger);
          assert.deepEqual(
            rows.map((r) => [r.kind, r.body]),
            [['work', workBody(res.job, 2)]],
          );
        },
        { ...testConfig, backoffBaseMs: 100_000, backoffMaxMs: 100_000, redispatchAfterMs: 1_000 },
      ));

    it('a sweep with nothing due reports nothing and changes nothing', () =>
      run(async ({ ledger, clock }) => {
        const queued = await submitJob(ledger);
        const running = await submitAndGrant(ledger);
        const done = await submitAndGrant(ledger);
        await settleOk(ledger, done.ref, finished());
        const backoff = await submitAndGrant(ledger);
        await settleOk(ledger, backoff.ref, failed(errors.transient), 'retry');
        await drainOutbox(ledger);
        clock.advance(1_000);
        const all = [queued.id, running.job.id, done.job.id, backoff.job.id];
        const before = await snapshot(ledger, all);
        assert.deepEqual(await ledger.sweep(), emptySweep);
        assert.deepEqual(await ledger.sweep(), emptySweep);
        assert.deepEqual(await snapshot(ledger, all), before);
        assert.deepEqual(await drainOutbox(ledger), []);
      }));

    it('one sweep pass takes every edge at once: leases of different attempts (each its own backoff), exhausted and cancelled', () =>
      run(async ({ ledger, clock }) => {
        const first = [await submitAndGrant(ledger, { maxAttempts: 3 }), await submitAndGrant(ledger, { maxAttempts: 3 })];
        // A job on its second attempt: its first attempt expired already.
        const second = await submitAndGrant(ledger, { maxAttempts: 3 });
        clock.advance(TTL);
        assert.deepEqual((await ledger.sweep()).requeued.map((r) => r.jobId).sort(), [...first, second].map((g) => g.job.id).sort());
        clock.advance(BASE);
        const regrants = await Promise.all(first.map((g) => ledger.grantLease({ jobId: g.job.id, attempt: 2, worker: 'w2' })));
        for (const regrant of regrants) expectGranted(regrant);
        const onSecond = await ledger.grantLease({ jobId: second.job.id, attempt: 2, worker: 'w2' });
        expectGranted(onSecond);
        const last = await submitAndGrant(ledger, { maxAttempts: 1 });
        const cancelled = await submitAndGrant(ledger, { maxAttempts: 3 });
        await ledger.cancel({ jobId: cancelled.job.id });
        const fresh = await submitAndGrant(ledger, { maxAttempts: 3 });
        await drainOutbox(ledger);
        clock.advance(TTL);
        const report = await ledger.sweep();
        assert.deepEqual(
          report.requeued.map((r) => [r.jobId, r.attempt]).sort(),
          [...first.map((g) => [g.job.id, 3]), [second.job.id, 3], [fresh.job.id, 2]].sort(),
        );
        assert.deepEqual([report.exhausted, report.cancelled], [[last.job.id], [cancelled.job.id]]);
        for (const g of [...first, second]) {
          const job = await mustGetJob(ledger, g.job.id);
          assert.deepEqual([job.state, job.attempt, job.notBefore], ['queued', 3, clock.now() + 2 * BASE], 'after attempt 2: twice the base backoff');
          assert.deepEqual(
            (await ledger.getAttempts(g.job.id)).map((a) => [a.attempt, a.outcome]),
            [
              [1, 'expired'],
              [2, 'expired'],
            ],
          );
        }
        const freshJob = await mustGetJob(ledger, fresh.job.id);
        assert.deepEqual([freshJob.state, freshJob.attempt, freshJob.notBefore], ['queued', 2, clock.now() + BASE]);
        assert.deepEqual(
          [(await mustGetJob(ledger, last.job.id)).failureReason, (await mustGetJob(ledger, cancelled.job.id)).failureReason],
          ['exhausted', 'cancelled'],
        );
        clock.advance(2 * BASE);
        const rows = await drainOutbox(ledger);
        const byJob = (a: { jobId: string }, b: { jobId: string }) => a.jobId.localeCompare(b.jobId);
        const expected = [...[...first, second].map((g) => workBody(g.job, 3)), workBody(fresh.job, 2)];
        assert.deepEqual(
          workRows(rows)
            .map((r) => r.body)
            .sort(byJob),
          expected.sort(byJob),
        );
        assert.equal(resultRows(rows, last.job.id).length + resultRows(rows, cancelled.job.id).length, 2);
      }));

    it('sweep handles at most `limit` expired leases per pass and the rest on the next', () =>
      run(async ({ ledger, clock }) => {
        const jobs = [await submitAndGrant(ledger), await submitAndGrant(ledger), await submitAndGrant(ledger)];
        clock.advance(TTL);
        const first = await ledger.sweep({ limit: 2 });
        assert.equal(first.requeued.length, 2);
        const second = await ledger.sweep({ limit: 2 });
        assert.equal(second.requeued.length, 1);
        assert.deepEqual([...first.requeued, ...second.requeued].map((r) => r.jobId).sort(), jobs.map((g) => g.job.id).sort());
        assert.deepEqual(await ledger.sweep({ limit: 2 }), emptySweep);
      }));
  });
}
