/** Ledger conformance: the read side (getJob, getAttempts, listJobs, countJobsByState). */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { errors, failed, finished, grant, mustGetJob, settleOk, submitAndGrant, submitJob } from '../testing.js';
import { TTL, BASE, listAll, ids, type Run } from './helpers.js';

export function queriesConformance(run: Run): void {
  describe('queries', () => {
    it('getJob scopes by tenant: another tenant sees undefined, an unknown id is undefined', () =>
      run(async ({ ledger }) => {
        const job = await submitJob(ledger, { tenant: 'acme' });
        assert.deepEqual(await ledger.getJob(job.id, 'acme'), job);
        assert.deepEqual(await ledger.getJob(job.id), job);
        assert.equal(await ledger.getJob(job.id, 'globex'), undefined);
        assert.equal(await ledger.getJob('no-such-job'), undefined);
        assert.equal(await ledger.getJob('no-such-job', 'acme'), undefined);
      }));

    it('getAttempts lists every attempt in order with worker, times and outcome', () =>
      run(async ({ ledger, clock }) => {
        const job = await submitJob(ledger, { maxAttempts: 3 });
        const t1 = clock.now();
        const g1 = await grant(ledger, job.id, 'w1');
        clock.advance(10);
        await settleOk(ledger, g1.ref, failed(errors.transient), 'retry');
        const e1 = clock.now();
        clock.advance(BASE);
        const t2 = clock.now();
        await grant(ledger, job.id, 'w2');
        clock.advance(TTL);
        const e2 = clock.now();
        await ledger.sweep();
        clock.advance(2 * BASE);
        const t3 = clock.now();
        const g3 = await grant(ledger, job.id, 'w3');
        clock.advance(7);
        await settleOk(ledger, g3.ref, finished(), 'finish');
        const e3 = clock.now();
        const attempts = await ledger.getAttempts(job.id);
        assert.deepEqual(
          attempts.map((a) => [a.jobId, a.attempt, a.worker, a.startedAt, a.endedAt, a.outcome]),
          [
            [job.id, 1, 'w1', t1, e1, 'retried'],
            [job.id, 2, 'w2', t2, e2, 'expired'],
            [job.id, 3, 'w3', t3, e3, 'finished'],
          ],
        );
        assert.deepEqual(await ledger.getAttempts('no-such-job'), []);
      }));

    it('listJobs filters by state, type and tenant', () =>
      run(async ({ ledger }) => {
        const queued = await submitJob(ledger, { tenant: 'acme', type: 'transcode' });
        const running = await submitAndGrant(ledger, { tenant: 'acme', type: 'render' });
        const done = await submitAndGrant(ledger, { tenant: 'acme', type: 'transcode' });
        await settleOk(ledger, done.ref, finished());
        const other = await submitJob(ledger, { tenant: 'globex', type: 'transcode' });
        assert.deepEqual(ids(await listAll(ledger, {})), ids([queued, running.job, done.job, other]));
        assert.deepEqual(ids(await listAll(ledger, { tenant: 'acme' })), ids([queued, running.job, done.job]));
        assert.deepEqual(ids(await listAll(ledger, { tenant: 'acme', state: 'queued' })), [queued.id]);
        assert.deepEqual(ids(await listAll(ledger, { state: 'running' })), [running.job.id]);
        assert.deepEqual(ids(await listAll(ledger, { state: 'finished' })), [done.job.id]);
        assert.deepEqual(ids(await listAll(ledger, { state: 'failed' })), []);
        assert.deepEqual(ids(await listAll(ledger, { type: 'transcode' })), ids([queued, done.job, other]));
        assert.deepEqual(ids(await listAll(ledger, { tenant: 'globex', type: 'transcode', state: 'queued' })), [other.id]);
        assert.deepEqual(ids(await listAll(ledger, { tenant: 'globex', type: 'render' })), []);
        const listed = await listAll(ledger, { tenant: 'acme', state: 'running' });
        assert.deepEqual(listed, [await mustGetJob(ledger, running.job.id)], 'listJobs returns whole jobs');
      }));

    it('listJobs pages with a cursor return every job exactly once', () =>
      run(async ({ ledger, clock }) => {
        const acme: string[] = [];
        const all: string[] = [];
        for (let i = 0; i < 7; i++) {
          const tenant = i % 3 === 2 ? 'globex' : 'acme';
          const job = await submitJob(ledger, { tenant });
          all.push(job.id);
          if (tenant === 'acme') acme.push(job.id);
          if (i % 2 === 0) clock.advance(1);
        }
        for (const [params, expected] of [
          [{ limit: 3 }, all],
          [{ limit: 1 }, all],
          [{ limit: 2, tenant: 'acme' }, acme],
        ] as const) {
          const seen: string[] = [];
          let cursor: string | undefined;
          let pages = 0;
          for (;;) {
            const page = await ledger.listJobs(cursor === undefined ? { ...params } : { ...params, cursor });
            pages++;
            assert.ok(page.jobs.length <= params.limit, 'a page holds at most `limit` jobs');
            seen.push(...page.jobs.map((j) => j.id));
            if (page.nextCursor === null) break;
            cursor = page.nextCursor;
            assert.ok(pages < 50, 'the pages end');
          }
          assert.equal(seen.length, expected.length, `every job exactly once with ${JSON.stringify(params)}`);
          assert.deepEqual([...seen].sort(), [...expected].sort());
          assert.ok(pages >= Math.ceil(expected.length / params.limit), 'the listing was paged');
        }
      }));

    it('countJobsByState counts every state, zeros included', () =>
      run(async ({ ledger }) => {
        assert.deepEqual(await ledger.countJobsByState(), { queued: 0, running: 0, finished: 0, failed: 0 });
        await submitJob(ledger);
        await submitJob(ledger);
        await submitAndGrant(ledger);
        const done = await submitAndGrant(ledger);
        await settleOk(ledger, done.ref, finished());
        const bad = await submitAndGrant(ledger);
        await settleOk(ledger, bad.ref, failed(errors.permanent));
        assert.deepEqual(await ledger.countJobsByState(), { queued: 2, running: 1, finished: 1, failed: 1 });
      }));
  });
}
