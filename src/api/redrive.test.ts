/**
 * Issue 14, through HTTP and the client, on SQLite and on PostgreSQL: a failed job retried
 * as a new job linked both ways (each keeps its one result message), a bulk retry by
 * filter, and the holding area (`GET /v1/failures`) and `GET /v1/jobs?state=failed`.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { Ledger } from '../ledger/ledger.js';
import { openPostgresLedger } from '../ledger/postgres/postgres-ledger.js';
import { fastTestUrl, TestSchemas } from '../../test/ledger/postgres/testing.js';
import { call, withEmbeddedApi, type ApiFixtureOptions } from '../../test/api/fixture.js';
import { waitFor } from '../../test/testing/wait.js';
import { Client } from '../client/client.js';
import { isPlanrunApiError } from '../client/errors.js';

/** Fails a queued job of the ledger as its worker would, with error `code`. */
async function failThrough(ledger: Ledger, jobId: string, code: string): Promise<void> {
  const grant = await ledger.grantLease({ jobId, attempt: 1, worker: 'worker-x', holderProof: 'proof' });
  assert.ok(grant.granted);
  const settled = await ledger.settle({
    jobId,
    attempt: 1,
    token: grant.token,
    outcome: { kind: 'failed', error: { class: 'permanent', code, message: `${code} on purpose` } },
  });
  assert.ok(settled.accepted);
}

async function refusal(promise: Promise<unknown>): Promise<{ code: string; status: number | undefined }> {
  try {
    await promise;
  } catch (error) {
    if (isPlanrunApiError(error)) return { code: error.code, status: error.status };
    throw error;
  }
  assert.fail('expected the API to refuse');
}

function redriveSuite(ledgerName: string, options: () => ApiFixtureOptions): void {
  describe(`redrive and the holding area over HTTP (${ledgerName})`, () => {
    it('a failed job retried is a new job linked both ways; each keeps its one result message; a second retry answers the first', () =>
      withEmbeddedApi(async (api) => {
        await api.harness.startWorker(api.connect());
        const client = new Client({ url: api.url, key: api.acmeKey });
        const old = await client.submit('probe', { ms: 1, runLog: api.harness.runLog, fail: 'permanent' }, { maxAttempts: 2, timeoutSeconds: 60 });
        const failed = await client.wait(old.id);
        assert.equal(failed.state, 'failed');

        const retried = await call(api.app, 'POST', `/v1/jobs/${old.id}/retry`, { key: api.acmeKey });
        assert.equal(retried.status, 201);
        const fresh = retried.body;
        assert.equal(fresh.created, true);
        assert.equal(fresh.retryOf, old.id);
        assert.equal(fresh.retriedBy, null);
        assert.notEqual(fresh.id, old.id);
        assert.deepEqual([fresh.type, fresh.tenant, fresh.maxAttempts, fresh.timeoutSeconds, fresh.attempt], ['probe', 'acme', 2, 60, 1]);

        const oldView = await client.get(old.id);
        assert.equal(oldView.retriedBy, fresh.id);
        assert.equal(oldView.retryOf, null);
        assert.equal(oldView.state, 'failed', 'the old failure stays');
        assert.deepEqual(oldView.error, failed.error);

        const second = await client.retry(old.id);
        assert.deepEqual([second.id, second.created], [fresh.id, false], 'a second retry makes no second job');
        const again = await call(api.app, 'POST', `/v1/jobs/${old.id}/retry`, { key: api.acmeKey, headers: { 'content-type': 'application/json' } });
        assert.equal(again.status, 200);

        // The new job runs (and fails the same way): one result message each, the old one not sent again.
        assert.equal((await client.wait(fresh.id)).state, 'failed');
        await waitFor('both result messages', () => api.harness.resultsFor(fresh.id).length === 1);
        assert.equal(api.harness.resultsFor(old.id).length, 1);
        assert.equal((await client.get(fresh.id)).retryOf, old.id);
      }, options()));

    it('refuses a job that did not fail (409 not_failed), and another tenant’s or an unknown job (404); an admin retries any', () =>
      withEmbeddedApi(async (api) => {
        const acme = new Client({ url: api.url, key: api.acmeKey });
        const globex = new Client({ url: api.url, key: api.globexKey });
        const queued = await acme.submit('probe', {});
        const notFailed = await call(api.app, 'POST', `/v1/jobs/${queued.id}/retry`, { key: api.acmeKey });
        assert.equal(notFailed.status, 409);
        assert.equal(notFailed.body.error.code, 'not_failed');
        assert.match(notFailed.body.error.message, new RegExp(`job ${queued.id} is queued: only a failed or cancelled job can be retried`));
        await failThrough(api.harness.ledger, queued.id, 'bad_input');
        assert.deepEqual(await refusal(globex.retry(queued.id)), { code: 'not_found', status: 404 });
        assert.deepEqual(await refusal(acme.retry('no-such-job')), { code: 'not_found', status: 404 });
        const admin = new Client({ url: api.url, key: api.adminKey });
        const byAdmin = await admin.retry(queued.id);
        assert.deepEqual([byAdmin.created, byAdmin.tenant, byAdmin.retryOf], [true, 'acme', queued.id]);
        // A cancelled job can be retried one by one.
        const cancelled = await acme.submit('probe', { n: 2 });
        await acme.cancel(cancelled.id);
        assert.equal((await acme.retry(cancelled.id)).retryOf, cancelled.id);
      }, options()));

    it('the holding area groups failed jobs by type and code per tenant; a bulk retry by filter redrives them and says how many', () =>
      withEmbeddedApi(async (api) => {
        const acme = new Client({ url: api.url, key: api.acmeKey });
        const globex = new Client({ url: api.url, key: api.globexKey });
        const admin = new Client({ url: api.url, key: api.adminKey });
        const failWith = async (client: Client, type: string, code: string) => {
          const job = await client.submit(type, { code });
          await failThrough(api.harness.ledger, job.id, code);
          return job.id;
        };
        const refused = [await failWith(acme, 'render', 'ffmpeg_refused'), await failWith(acme, 'render', 'ffmpeg_refused')];
        refused.push(await failWith(acme, 'render', 'ffmpeg_refused'));
        const other = await failWith(acme, 'render', 'disk_full');
        const theirs = await failWith(globex, 'render', 'ffmpeg_refused');
        const cancelled = await acme.submit('render', { n: 9 });
        await acme.cancel(cancelled.id);

        const failedPage = await acme.list({ state: 'failed' });
        assert.equal(failedPage.jobs.length, 5, "acme's failed jobs, the cancelled one included");
        assert.ok(failedPage.jobs.every((job) => job.state === 'failed' && job.tenant === 'acme'));

        const groups = await acme.failures();
        assert.deepEqual(
          groups.map((g) => [g.type, g.code, g.count]),
          [
            ['render', 'ffmpeg_refused', 3],
            ['render', 'disk_full', 1],
          ],
        );
        assert.ok(refused.includes(groups[0]!.sampleJobId));
        assert.ok(Date.parse(groups[0]!.firstEndedAt) <= Date.parse(groups[0]!.lastEndedAt));
        assert.deepEqual(
          (await admin.failures()).map((g) => g.count),
          [4, 1],
          'an admin sees every tenant',
        );
        assert.deepEqual((await acme.failures({ endedAfter: new Date(Date.now() + 60_000) })).length, 0, 'nothing ended in the future');
        const tenantNamed = await call(api.app, 'GET', '/v1/failures?tenant=globex', { key: api.acmeKey });
        assert.equal(tenantNamed.status, 400);
        const badTime = await call(api.app, 'GET', '/v1/failures?endedAfter=yesterday', { key: api.acmeKey });
        assert.deepEqual([badTime.status, badTime.body.error.code], [400, 'invalid_request']);
        assert.match(badTime.body.error.message, /endedAfter must be an ISO 8601 time/);

        const bulk = await acme.retryFailed({ type: 'render', code: 'ffmpeg_refused' });
        assert.equal(bulk.retried, 3);
        assert.deepEqual(bulk.jobs.map((j) => j.retryOf).sort(), [...refused].sort());
        for (const { id, retryOf } of bulk.jobs) assert.equal((await acme.get(retryOf)).retriedBy, id);
        assert.deepEqual(
          (await acme.failures()).map((g) => g.code),
          ['disk_full'],
          'redriven jobs left the holding area',
        );
        assert.equal((await acme.retryFailed({ type: 'render', code: 'ffmpeg_refused' })).retried, 0, 'each is redriven once');

        const everyTenant = await admin.retryFailed({ code: 'ffmpeg_refused', tenant: 'globex' });
        assert.deepEqual(
          everyTenant.jobs.map((j) => j.retryOf),
          [theirs],
        );
        const all = await call(api.app, 'POST', '/v1/jobs/retry', { key: api.acmeKey, body: {} });
        assert.deepEqual([all.status, all.body.retried, all.body.jobs[0].retryOf], [200, 1, other], 'cancelled jobs are left out');
        const empty = await call(api.app, 'POST', '/v1/jobs/retry', { key: api.acmeKey });
        assert.deepEqual([empty.status, empty.body.retried], [200, 0], 'no body: every failed job');
        const tenantBody = await call(api.app, 'POST', '/v1/jobs/retry', { key: api.acmeKey, body: { tenant: 'globex' } });
        assert.equal(tenantBody.status, 400);
      }, options()));
  });
}

redriveSuite('SQLite', () => ({}));

const schemas = new TestSchemas();
after(() => schemas.dropAll());
redriveSuite('PostgreSQL', () => {
  const schema = schemas.reserve();
  return { openLedger: (config) => openPostgresLedger({ connectionString: fastTestUrl(), schema, config, poolSize: 4 }) };
});
