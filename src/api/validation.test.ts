import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { call, withEmbeddedApi } from '../../test/api/fixture.js';

describe('requests the API refuses', () => {
  it('answers 400 naming the field for each kind of bad submission, and records nothing', () =>
    withEmbeddedApi(async (api) => {
      const cases: Array<[unknown, string]> = [
        [{ input: {} }, "body must have required property 'type'"],
        [{ type: 'probe' }, "body must have required property 'input'"],
        [{ type: 5, input: {} }, 'body/type must be string'],
        [{ type: 'has.dot', input: {} }, 'body/type must match pattern "^[A-Za-z][A-Za-z0-9_-]{0,63}$"'],
        [{ type: 'probe', input: {}, maxAttempts: 0 }, 'body/maxAttempts must be >= 1'],
        [{ type: 'probe', input: {}, maxAttempts: 1.5 }, 'body/maxAttempts must be integer'],
        [{ type: 'probe', input: {}, maxAttempts: '3' }, 'body/maxAttempts must be integer'],
        [{ type: 'probe', input: {}, requires: 'gpu' }, 'body/requires must be array'],
        [{ type: 'probe', input: {}, requires: ['gpu', 'a b'] }, 'body/requires/1 must match pattern "^[A-Za-z][A-Za-z0-9_-]{0,63}$"'],
        [{ type: 'probe', input: {}, maxAtempts: 3 }, 'body must NOT have property "maxAtempts"'],
        [[{ type: 'probe', input: {} }], 'body must be object'],
      ];
      for (const [body, message] of cases) {
        const answer = await call(api.app, 'POST', '/v1/jobs', { key: api.acmeKey, body });
        assert.equal(answer.status, 400, JSON.stringify(body));
        assert.deepEqual(answer.body, { error: { code: 'invalid_request', message } }, JSON.stringify(body));
      }
      const longKey = await call(api.app, 'POST', '/v1/jobs', {
        key: api.acmeKey,
        body: { type: 'probe', input: {} },
        headers: { 'idempotency-key': 'k'.repeat(256) },
      });
      assert.equal(longKey.status, 400);
      assert.equal(longKey.body.error.message, 'headers/idempotency-key must NOT have more than 255 characters');
      assert.deepEqual((await call(api.app, 'GET', '/v1/jobs', { key: api.acmeKey })).body.jobs, []);
    }));

  it('answers 400 to a body that is not JSON, and 415 to one of another media type', () =>
    withEmbeddedApi(async (api) => {
      const broken = await call(api.app, 'POST', '/v1/jobs', { key: api.acmeKey, body: '{"type": "probe",', headers: { 'content-type': 'application/json' } });
      assert.equal(broken.status, 400);
      assert.equal(broken.body.error.code, 'invalid_request');
      assert.match(broken.body.error.message, /JSON/);
      const xml = await call(api.app, 'POST', '/v1/jobs', { key: api.acmeKey, body: '<job type="probe"/>', headers: { 'content-type': 'application/xml' } });
      assert.equal(xml.status, 415);
      assert.equal(xml.body.error.code, 'unsupported_media_type');
    }));

  it('answers 413 to a body over the default limit of 1 MiB, saying so', () =>
    withEmbeddedApi(async (api) => {
      const answer = await call(api.app, 'POST', '/v1/jobs', { key: api.acmeKey, body: { type: 'probe', input: 'x'.repeat(1024 * 1024) } });
      assert.equal(answer.status, 413);
      assert.deepEqual(answer.body, { error: { code: 'payload_too_large', message: 'body is larger than the limit of 1048576 bytes' } });
      const justUnder = await call(api.app, 'POST', '/v1/jobs', { key: api.acmeKey, body: { type: 'probe', input: 'x'.repeat(1000 * 1000) } });
      assert.equal(justUnder.status, 202);
    }));

  it('takes its body limit and batch size from its options', () =>
    withEmbeddedApi(
      async (api) => {
        const big = await call(api.app, 'POST', '/v1/jobs', { key: api.acmeKey, body: { type: 'probe', input: 'x'.repeat(2048) } });
        assert.equal(big.status, 413);
        assert.match(big.body.error.message, /limit of 2048 bytes/);
        const jobs = Array.from({ length: 4 }, () => ({ type: 'probe', input: {} }));
        const batch = await call(api.app, 'POST', '/v1/jobs/batch', { key: api.acmeKey, body: { jobs } });
        assert.equal(batch.status, 400);
        assert.equal(batch.body.error.message, 'body/jobs must NOT have more than 3 items');
      },
      { limits: { bodyBytes: 2048, batchJobs: 3 } },
    ));

  it('answers 400 to a bad list query, naming the parameter, and to a cursor it never issued', () =>
    withEmbeddedApi(async (api) => {
      const cases: Array<[string, string]> = [
        ['limit=0', 'querystring/limit must be >= 1'],
        ['limit=many', 'querystring/limit must be integer'],
        ['limit=1001', 'querystring/limit must be <= 1000'],
        ['state=done', 'querystring/state must be equal to one of the allowed values'],
        ['owner=globex', 'querystring must NOT have property "owner"'],
        ['cursor=bm90LWEtY3Vyc29y', 'cursor is not one this ledger returned'],
      ];
      for (const [query, message] of cases) {
        const answer = await call(api.app, 'GET', `/v1/jobs?${query}`, { key: api.acmeKey });
        assert.equal(answer.status, 400, query);
        assert.deepEqual(answer.body, { error: { code: 'invalid_request', message } }, query);
      }
    }));

  it('answers an unknown route 404, and a malformed URL 400, in the same error shape', () =>
    withEmbeddedApi(async (api) => {
      const answer = await call(api.app, 'GET', '/v2/jobs?x=1');
      assert.equal(answer.status, 404);
      assert.deepEqual(answer.body, { error: { code: 'not_found', message: 'no route GET /v2/jobs' } });
      // The router's own refusals, before any route runs, keep the shape too.
      const malformed = await call(api.app, 'GET', '/v1/jobs/%E0%A4%A', { key: api.acmeKey });
      assert.equal(malformed.status, 400);
      assert.deepEqual(malformed.body, { error: { code: 'invalid_request', message: "'/v1/jobs/%E0%A4%A' is not a valid url component" } });
    }));
});
