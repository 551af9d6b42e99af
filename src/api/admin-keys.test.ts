import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { call, readEventStream, withEmbeddedApi, type ApiFixture } from '../../test/api/fixture.js';
import { waitFor } from '../../test/testing/wait.js';

async function submit(api: ApiFixture, key: string, body: Record<string, unknown> = {}): Promise<string> {
  const answer = await call(api.app, 'POST', '/v1/jobs', { key, body: { type: 'probe', input: {}, ...body } });
  assert.equal(answer.status, 202, JSON.stringify(answer.body));
  return answer.body.id as string;
}

function ids(answer: { body: { jobs: Array<{ id: string }> } }): string[] {
  return answer.body.jobs.map((job) => job.id).sort();
}

describe('admin keys', () => {
  it("read, list, stream and cancel every tenant's jobs; list one tenant's with ?tenant=", () =>
    withEmbeddedApi(
      async (api) => {
        const acmeJob = await submit(api, api.acmeKey);
        const globexJob = await submit(api, api.globexKey);

        const read = await call(api.app, 'GET', `/v1/jobs/${acmeJob}`, { key: api.adminKey });
        assert.equal(read.status, 200);
        assert.equal(read.body.tenant, 'acme');
        assert.deepEqual(ids(await call(api.app, 'GET', '/v1/jobs', { key: api.adminKey })), [acmeJob, globexJob].sort());
        assert.deepEqual(ids(await call(api.app, 'GET', '/v1/jobs?tenant=globex', { key: api.adminKey })), [globexJob]);
        assert.deepEqual(ids(await call(api.app, 'GET', '/v1/jobs?tenant=initech', { key: api.adminKey })), []);

        let streamed = 0;
        const stream = readEventStream(api, globexJob, api.adminKey, { onEvent: () => streamed++ });
        await waitFor('the stream to open', () => streamed > 0);
        const cancelled = await call(api.app, 'POST', `/v1/jobs/${globexJob}/cancel`, { key: api.adminKey });
        assert.equal(cancelled.status, 200);
        assert.equal(cancelled.body.state, 'failed');
        assert.equal(cancelled.body.reason, 'cancelled');
        assert.deepEqual(
          (await stream).events.map((event) => [event.event, event.data.state]),
          [
            ['state', 'queued'],
            ['state', 'failed'],
          ],
        );
        // The job's own tenant sees the admin's cancel.
        assert.equal((await call(api.app, 'GET', `/v1/jobs/${globexJob}`, { key: api.globexKey })).body.reason, 'cancelled');

        const missing = await call(api.app, 'POST', '/v1/jobs/no-such-job/cancel', { key: api.adminKey });
        assert.equal(missing.status, 404);
        assert.deepEqual(missing.body, { error: { code: 'not_found', message: 'no job no-such-job' } });
      },
      { eventHeartbeatMs: 50 },
    ));

  it('submit for the tenant they name, which they must name; tenant keys may not name one', () =>
    withEmbeddedApi(async (api) => {
      const forAcme = await submit(api, api.adminKey, { tenant: 'acme' });
      const own = await call(api.app, 'GET', `/v1/jobs/${forAcme}`, { key: api.acmeKey });
      assert.equal(own.status, 200, "the job is acme's own");
      assert.equal((await call(api.app, 'GET', `/v1/jobs/${forAcme}`, { key: api.globexKey })).status, 404);

      const unnamed = await call(api.app, 'POST', '/v1/jobs', { key: api.adminKey, body: { type: 'probe', input: {} } });
      assert.equal(unnamed.status, 400);
      assert.deepEqual(unnamed.body, {
        error: { code: 'invalid_request', message: 'body must have property "tenant" with an admin key: name the tenant the job is for' },
      });
      const badName = await call(api.app, 'POST', '/v1/jobs', { key: api.adminKey, body: { type: 'probe', input: {}, tenant: 'acme.eu' } });
      assert.equal(badName.status, 400);
      assert.match(badName.body.error.message, /^tenant name "acme.eu" must start with a letter/);

      const batch = await call(api.app, 'POST', '/v1/jobs/batch', {
        key: api.adminKey,
        body: {
          jobs: [
            { type: 'probe', input: {}, tenant: 'acme' },
            { type: 'probe', input: {}, tenant: 'globex' },
          ],
        },
      });
      assert.equal(batch.status, 202);
      assert.deepEqual(
        batch.body.jobs.map((job: { tenant: string }) => job.tenant),
        ['acme', 'globex'],
      );
      const halfNamed = await call(api.app, 'POST', '/v1/jobs/batch', {
        key: api.adminKey,
        body: {
          jobs: [
            { type: 'probe', input: {}, tenant: 'acme' },
            { type: 'probe', input: {} },
          ],
        },
      });
      assert.equal(halfNamed.status, 400);
      assert.equal(halfNamed.body.error.message, 'body/jobs/1 must have property "tenant" with an admin key: name the tenant the job is for');

      const tenantNaming = await call(api.app, 'POST', '/v1/jobs/batch', {
        key: api.acmeKey,
        body: { jobs: [{ type: 'probe', input: {}, tenant: 'globex' }] },
      });
      assert.equal(tenantNaming.status, 400);
      assert.equal(tenantNaming.body.error.message, 'body/jobs/0 must NOT have property "tenant"');
      const tenantFiltering = await call(api.app, 'GET', '/v1/jobs?tenant=globex', { key: api.acmeKey });
      assert.equal(tenantFiltering.status, 400);
      assert.equal(tenantFiltering.body.error.message, 'querystring must NOT have property "tenant"');
      // Nothing of the refused requests was recorded: globex has only the admin's batch job.
      assert.equal((await call(api.app, 'GET', '/v1/jobs', { key: api.globexKey })).body.jobs.length, 1);
    }));
});

describe('revoking a key', () => {
  it('answers 401 on every route at once, ends its open event streams, and leaves other keys working', () =>
    withEmbeddedApi(
      async (api) => {
        const job = await submit(api, api.acmeKey);
        const other = await api.keys.create('acme');
        let events = 0;
        const stream = readEventStream(api, job, api.acmeKey, { onEvent: () => events++ });
        await waitFor('the stream to open', () => events > 0);

        const acmeId = (await api.keys.list()).find((key) => key.tenant === 'acme')!.id;
        assert.equal(await api.keys.revoke(acmeId), 'revoked');
        for (const [method, url] of [
          ['GET', '/v1/jobs'],
          ['POST', '/v1/jobs'],
          ['POST', '/v1/jobs/batch'],
          ['POST', '/v1/uploads'],
          ['GET', `/v1/jobs/${job}`],
          ['GET', `/v1/jobs/${job}/events`],
          ['POST', `/v1/jobs/${job}/cancel`],
          ['GET', `/v1/jobs/${job}/outputs/x`],
          ['GET', '/v1/fleet'],
          ['GET', '/metrics'],
        ] as const) {
          const answer = await call(api.app, method, url, { key: api.acmeKey, body: method === 'POST' ? {} : undefined });
          assert.equal(answer.status, 401, `${method} ${url}`);
          assert.deepEqual(answer.body, { error: { code: 'unauthorized', message: 'unknown or revoked API key' } });
        }
        // The open stream ends at its next heartbeat, though its job is still queued.
        const ended = await stream;
        assert.equal(ended.status, 200);
        assert.deepEqual(
          ended.events.map((event) => event.data.state),
          ['queued'],
        );
        assert.equal((await call(api.app, 'GET', `/v1/jobs/${job}`, { key: other.key })).body.state, 'queued');
      },
      { eventHeartbeatMs: 50 },
    ));

  it('records when each key was last used', () =>
    withEmbeddedApi(async (api) => {
      const before = Date.now();
      await call(api.app, 'GET', '/v1/jobs', { key: api.globexKey });
      const listed = await api.keys.list();
      const globex = listed.find((key) => key.tenant === 'globex')!;
      assert.ok(globex.lastUsedAt !== undefined && globex.lastUsedAt >= before, 'recorded');
      assert.equal(listed.find((key) => key.kind === 'admin')!.lastUsedAt, undefined, 'an unused key has none');
    }));
});
