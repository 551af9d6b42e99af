import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { waitFor } from '../../test/testing/wait.js';
import { call, withEmbeddedApi } from '../../test/api/fixture.js';

describe('jobs, batches, cancel, lists, fleet and readiness', () => {
  it('a batch answers 202 with one job per item, in order, each with its own idempotency key', () =>
    withEmbeddedApi(async (api) => {
      const earlier = await call(api.app, 'POST', '/v1/jobs', {
        key: api.acmeKey,
        body: { type: 'probe', input: { n: 0 } },
        headers: { 'idempotency-key': 'k-1' },
      });
      const batch = await call(api.app, 'POST', '/v1/jobs/batch', {
        key: api.acmeKey,
        body: {
          jobs: [
            { type: 'probe', input: { n: 0 }, idempotencyKey: 'k-1' },
            { type: 'probe', input: { n: 2 }, maxAttempts: 5, requires: ['ffmpeg'] },
            { type: 'sleep', input: { n: 3 }, idempotencyKey: 'k-3' },
          ],
        },
      });
      assert.equal(batch.status, 202);
      const [first, second, third] = batch.body.jobs;
      assert.equal(batch.body.jobs.length, 3);
      assert.deepEqual([first.id, first.created], [earlier.body.id, false]);
      assert.deepEqual([second.created, second.maxAttempts, second.requires, second.state], [true, 5, ['ffmpeg'], 'queued']);
      assert.deepEqual([third.created, third.type, third.idempotencyKey, third.tenant], [true, 'sleep', 'k-3', 'acme']);

      const listed = await call(api.app, 'GET', '/v1/jobs', { key: api.acmeKey });
      assert.equal(listed.body.jobs.length, 3);
    }));

  it('a reused Idempotency-Key with another body is a 409 idempotency_conflict naming the key, alone or in a batch, and records nothing', () =>
    withEmbeddedApi(async (api) => {
      const headers = { 'idempotency-key': 'order-7' };
      const first = await call(api.app, 'POST', '/v1/jobs', { key: api.acmeKey, body: { type: 'probe', input: { n: 1 } }, headers });
      const other = await call(api.app, 'POST', '/v1/jobs', { key: api.acmeKey, body: { type: 'probe', input: { n: 2 } }, headers });
      assert.equal(other.status, 409);
      assert.equal(other.body.error.code, 'idempotency_conflict');
      assert.match(other.body.error.message, /idempotency key "order-7" was used for job \S+ with another submission \(its input differ\)/);
      assert.ok(other.body.error.message.includes(first.body.id), other.body.error.message);
      const batch = await call(api.app, 'POST', '/v1/jobs/batch', {
        key: api.acmeKey,
        body: {
          jobs: [
            { type: 'probe', input: { n: 3 } },
            { type: 'probe', input: { n: 1 }, maxAttempts: 9, idempotencyKey: 'order-7' },
          ],
        },
      });
      assert.deepEqual([batch.status, batch.body.error.code], [409, 'idempotency_conflict']);
      assert.match(batch.body.error.message, /its maxAttempts differ/);
      const listed = await call(api.app, 'GET', '/v1/jobs', { key: api.acmeKey });
      assert.deepEqual(
        listed.body.jobs.map((job: { id: string }) => job.id),
        [first.body.id],
        'only the first job exists',
      );
    }));

  it('one invalid item rejects the whole batch with a 400 naming its index, and records none of it', () =>
    withEmbeddedApi(async (api) => {
      const batch = await call(api.app, 'POST', '/v1/jobs/batch', {
        key: api.acmeKey,
        body: {
          jobs: [
            { type: 'probe', input: {} },
            { type: 'probe', input: {}, idempotencyKey: '' },
          ],
        },
      });
      assert.equal(batch.status, 400);
      assert.equal(batch.body.error.message, 'body/jobs/1/idempotencyKey must NOT have fewer than 1 characters');
      const empty = await call(api.app, 'POST', '/v1/jobs/batch', { key: api.acmeKey, body: { jobs: [] } });
      assert.equal(empty.body.error.message, 'body/jobs must NOT have fewer than 1 items');
      assert.deepEqual((await call(api.app, 'GET', '/v1/jobs', { key: api.acmeKey })).body.jobs, []);
    }));

  it('cancelling a queued job fails it at once and announces it; a second cancel is a 409, an unknown job a 404', () =>
    withEmbeddedApi(async (api) => {
      const submitted = await call(api.app, 'POST', '/v1/jobs', { key: api.acmeKey, body: { type: 'probe', input: {} } });
      const path = `/v1/jobs/${submitted.body.id}/cancel`;
      // As `curl -H 'Content-Type: application/json' -X POST` sends it: the type, no body.
      const cancelled = await call(api.app, 'POST', path, { key: api.acmeKey, headers: { 'content-type': 'application/json' } });
      assert.equal(cancelled.status, 200);
      assert.equal(cancelled.body.state, 'failed');
      assert.equal(cancelled.body.reason, 'cancelled');
      assert.deepEqual(cancelled.body.attempts, []);
      await waitFor('the result message', () => api.harness.resultsFor(submitted.body.id).length > 0);
      assert.equal(api.harness.resultsFor(submitted.body.id)[0]!.routingKey, 'acme.probe.failed');

      const again = await call(api.app, 'POST', path, { key: api.acmeKey });
      assert.equal(again.status, 409);
      assert.deepEqual(again.body, { error: { code: 'conflict', message: `job ${submitted.body.id} already ended (failed: cancelled)` } });
      const unknown = await call(api.app, 'POST', '/v1/jobs/nope/cancel', { key: api.acmeKey });
      assert.equal(unknown.status, 404);
    }));

  it('lists newest first, a page at a time, until nextCursor is null; filters by state and type', () =>
    withEmbeddedApi(async (api) => {
      const ids: string[] = [];
      for (let n = 0; n < 5; n++) {
        const type = n % 2 === 0 ? 'probe' : 'sleep';
        ids.push((await call(api.app, 'POST', '/v1/jobs', { key: api.acmeKey, body: { type, input: { n } } })).body.id);
      }
      await call(api.app, 'POST', '/v1/jobs', { key: api.globexKey, body: { type: 'probe', input: {} } });
      await call(api.app, 'POST', `/v1/jobs/${ids[0]}/cancel`, { key: api.acmeKey });

      const seen: string[] = [];
      const sizes: number[] = [];
      let cursor: string | null = null;
      do {
        const query: string = cursor === null ? 'limit=2' : `limit=2&cursor=${encodeURIComponent(cursor)}`;
        const page = await call(api.app, 'GET', `/v1/jobs?${query}`, { key: api.acmeKey });
        assert.equal(page.status, 200);
        sizes.push(page.body.jobs.length);
        seen.push(...page.body.jobs.map((job: { id: string }) => job.id));
        cursor = page.body.nextCursor;
      } while (cursor !== null);
      assert.deepEqual(sizes, [2, 2, 1]);
      assert.deepEqual(seen, [...ids].reverse());

      const probes = await call(api.app, 'GET', '/v1/jobs?type=probe', { key: api.acmeKey });
      assert.deepEqual(
        probes.body.jobs.map((job: { id: string }) => job.id),
        [ids[4], ids[2], ids[0]],
      );
      const failed = await call(api.app, 'GET', '/v1/jobs?state=failed', { key: api.acmeKey });
      assert.deepEqual(
        failed.body.jobs.map((job: { id: string }) => job.id),
        [ids[0]],
      );
      const queuedProbes = await call(api.app, 'GET', '/v1/jobs?state=queued&type=probe', { key: api.acmeKey });
      assert.deepEqual(
        queuedProbes.body.jobs.map((job: { id: string }) => job.id),
        [ids[4], ids[2]],
      );
      assert.equal(queuedProbes.body.nextCursor, null);
    }));

  it('the fleet lists each worker with its job types, capabilities, slots, running jobs and last heartbeat', () =>
    withEmbeddedApi(async (api) => {
      assert.deepEqual((await call(api.app, 'GET', '/v1/fleet', { key: api.acmeKey })).body, { workers: [] });
      const before = Date.now();
      await api.harness.startWorker(api.connect(), { slots: 3, capabilities: ['gpu'] });
      const fleet = await waitFor('the worker', async () => {
        const answer = await call(api.app, 'GET', '/v1/fleet', { key: api.globexKey });
        return answer.body.workers.length > 0 ? answer.body : undefined;
      });
      assert.equal(fleet.workers.length, 1);
      const [worker] = fleet.workers;
      assert.equal(typeof worker.id, 'string');
      assert.deepEqual([worker.jobTypes, worker.capabilities, worker.slots, worker.running], [['probe'], ['gpu'], 3, 0]);
      assert.ok(Date.parse(worker.lastHeartbeat) >= before - 1000, worker.lastHeartbeat);
      assert.equal(new Date(worker.lastHeartbeat).toISOString(), worker.lastHeartbeat);
    }));

  it('readyz answers 503 naming the ledger when the ledger cannot answer', () =>
    withEmbeddedApi(async (api) => {
      assert.equal((await call(api.app, 'GET', '/readyz')).status, 200);
      await api.harness.ledger.close();
      const answer = await call(api.app, 'GET', '/readyz');
      assert.equal(answer.status, 503);
      assert.equal(answer.body.error.code, 'unavailable');
      assert.match(answer.body.error.message, /^not ready: ledger: /);
      // Routes that need the ledger answer 503 too, not 500.
      const read = await call(api.app, 'GET', '/v1/jobs', { key: api.acmeKey });
      assert.equal(read.status, 503);
      assert.equal(read.body.error.code, 'unavailable');
      assert.equal((await call(api.app, 'GET', '/healthz')).status, 200);
    }));
});
