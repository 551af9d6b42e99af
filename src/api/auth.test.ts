import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { call, withEmbeddedApi } from '../../test/api/fixture.js';

const planrun = fileURLToPath(new URL('../cli/main.js', import.meta.url));

const protectedRoutes = [
  ['GET', '/v1/jobs'],
  ['POST', '/v1/jobs'],
  ['POST', '/v1/jobs/batch'],
  ['GET', '/v1/jobs/some-id'],
  ['GET', '/v1/jobs/some-id/events'],
  ['POST', '/v1/jobs/some-id/cancel'],
  ['GET', '/v1/fleet'],
] as const;

describe('API keys and tenants', () => {
  it('every /v1 route answers 401 without a key, with a clear message and a Bearer challenge', () =>
    withEmbeddedApi(async (api) => {
      for (const [method, url] of protectedRoutes) {
        const answer = await call(api.app, method, url, { body: method === 'POST' ? {} : undefined });
        assert.equal(answer.status, 401, `${method} ${url}`);
        assert.deepEqual(answer.body, {
          error: { code: 'unauthorized', message: 'missing API key: send the header "Authorization: Bearer <key>"' },
        });
        assert.equal(answer.headers['www-authenticate'], 'Bearer');
      }
    }));

  it('a key of the right shape that nobody issued, junk, and a revoked key all get the same 401', () =>
    withEmbeddedApi(async (api) => {
      const issued = await api.keys.create('initech');
      await api.keys.revoke(issued.id);
      const forged = `prk_${'A'.repeat(43)}`;
      for (const key of [forged, 'hunter2', issued.key]) {
        const answer = await call(api.app, 'GET', '/v1/jobs', { key });
        assert.equal(answer.status, 401);
        assert.deepEqual(answer.body, { error: { code: 'unauthorized', message: 'unknown or revoked API key' } });
      }
      const basic = await call(api.app, 'GET', '/v1/jobs', { headers: { authorization: 'Basic dXNlcjpwYXNz' } });
      assert.equal(basic.status, 401);
      assert.equal(basic.body.error.message, 'the Authorization header must be "Bearer <key>"');
    }));

  it('refuses a caller without a key before reading its body, even an oversized one', () =>
    withEmbeddedApi(async (api) => {
      const answer = await call(api.app, 'POST', '/v1/jobs', { body: { type: 'probe', input: 'x'.repeat(2 * 1024 * 1024) } });
      assert.equal(answer.status, 401);
    }));

  it('the tenant comes from the key: a body naming one is refused', () =>
    withEmbeddedApi(async (api) => {
      const answer = await call(api.app, 'POST', '/v1/jobs', { key: api.acmeKey, body: { type: 'probe', input: {}, tenant: 'globex' } });
      assert.equal(answer.status, 400);
      assert.equal(answer.body.error.message, 'body must NOT have property "tenant"');
      const { body } = await call(api.app, 'GET', '/v1/jobs', { key: api.globexKey });
      assert.deepEqual(body.jobs, []);
    }));

  it("one tenant cannot read, stream, cancel or list another's job: 404, the same answer as a missing job", () =>
    withEmbeddedApi(async (api) => {
      const submitted = await call(api.app, 'POST', '/v1/jobs', { key: api.acmeKey, body: { type: 'probe', input: {} } });
      const id = submitted.body.id as string;
      const missing = await call(api.app, 'GET', '/v1/jobs/no-such-job', { key: api.globexKey });
      assert.equal(missing.status, 404);

      for (const [method, url] of [
        ['GET', `/v1/jobs/${id}`],
        ['GET', `/v1/jobs/${id}/events`],
        ['POST', `/v1/jobs/${id}/cancel`],
      ] as const) {
        const answer = await call(api.app, method, url, { key: api.globexKey });
        assert.equal(answer.status, 404, `${method} ${url}`);
        assert.deepEqual(answer.body, { error: { code: 'not_found', message: `no job ${id}` } });
      }
      assert.deepEqual((await call(api.app, 'GET', '/v1/jobs', { key: api.globexKey })).body.jobs, []);

      // The job is untouched by the attempt to cancel it, and its tenant sees it.
      const own = await call(api.app, 'GET', `/v1/jobs/${id}`, { key: api.acmeKey });
      assert.equal(own.status, 200);
      assert.equal(own.body.state, 'queued');
      assert.equal(own.body.cancelRequested, false);
      assert.deepEqual(
        (await call(api.app, 'GET', '/v1/jobs', { key: api.acmeKey })).body.jobs.map((job: { id: string }) => job.id),
        [id],
      );
    }));

  it('health, readiness and the OpenAPI document need no key', () =>
    withEmbeddedApi(async (api) => {
      assert.deepEqual((await call(api.app, 'GET', '/healthz')).body, { status: 'ok' });
      assert.deepEqual((await call(api.app, 'GET', '/readyz')).body, { status: 'ready' });
      const openapi = await call(api.app, 'GET', '/openapi.json');
      assert.equal(openapi.status, 200);
      assert.match(openapi.body.openapi, /^3\./);
      for (const path of ['/v1/jobs', '/v1/jobs/batch', '/v1/jobs/{id}', '/v1/jobs/{id}/events', '/v1/jobs/{id}/cancel', '/v1/fleet', '/healthz', '/readyz']) {
        assert.ok(openapi.body.paths[path], `the document describes ${path}`);
      }
      assert.deepEqual(openapi.body.paths['/v1/jobs'].post.security, [{ apiKey: [] }]);
      assert.equal(openapi.body.paths['/healthz'].get.security, undefined);
      assert.equal(openapi.body.components.securitySchemes.apiKey.scheme, 'bearer');
    }));

  it('`planrun keys create` prints a key alone on its last line, and the API takes it', () =>
    withEmbeddedApi(async (api) => {
      const { stdout } = await promisify(execFile)(process.execPath, [planrun, 'keys', 'create', '--tenant', 'hooli', '--data-dir', api.harness.dir.path]);
      const lastLine = stdout.trimEnd().split('\n').pop()!;
      assert.match(lastLine, /^prk_[A-Za-z0-9_-]{43}$/);
      const submitted = await call(api.app, 'POST', '/v1/jobs', { key: lastLine, body: { type: 'probe', input: {} } });
      assert.equal(submitted.status, 202);
      assert.equal(submitted.body.tenant, 'hooli');
    }));
});
