import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { call, withEmbeddedApi } from '../../test/api/fixture.js';
import { waitFor } from '../../test/testing/wait.js';
import { defaultRateLimit, formatRateLimit, parseRateLimit } from './rate-limit.js';

const job = { type: 'probe', input: {} };

describe('rate limits on submission', () => {
  it('answer 429 rate_limited with Retry-After once a key spends its budget, shared by the submission routes and per key', () =>
    withEmbeddedApi(
      async (api) => {
        assert.equal((await call(api.app, 'POST', '/v1/jobs', { key: api.acmeKey, body: job })).status, 202);
        assert.equal((await call(api.app, 'POST', '/v1/jobs/batch', { key: api.acmeKey, body: { jobs: [job, job] } })).status, 202);
        // The third request, whichever route: over the limit of 2 a minute.
        for (const [url, body] of [
          ['/v1/jobs', job],
          ['/v1/jobs/batch', { jobs: [job] }],
          ['/v1/uploads', { name: 'a.txt', bytes: 1 }],
        ] as const) {
          const limited = await call(api.app, 'POST', url, { key: api.acmeKey, body });
          assert.equal(limited.status, 429, url);
          assert.equal(limited.body.error.code, 'rate_limited');
          assert.match(limited.body.error.message, /^this API key is over its submission limit \(2\/min\); retry in \d+ (seconds?|minutes?)$/);
          const retryAfter = Number(limited.headers['retry-after']);
          assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${String(limited.headers['retry-after'])}`);
        }
        // Only the accepted requests made jobs.
        assert.equal((await call(api.app, 'GET', '/v1/jobs', { key: api.acmeKey })).body.jobs.length, 3);
        // Reading is not limited, and another key of the same tenant and address has its own budget.
        assert.equal((await call(api.app, 'GET', '/v1/jobs', { key: api.acmeKey })).status, 200);
        const second = (await api.keys.create('acme')).key;
        assert.equal((await call(api.app, 'POST', '/v1/jobs', { key: second, body: job })).status, 202);
        assert.equal((await call(api.app, 'POST', '/v1/jobs', { key: api.globexKey, body: job })).status, 202);
        // No key: 401, not 429, and it spends nothing.
        assert.equal((await call(api.app, 'POST', '/v1/jobs', { body: job })).status, 401);
      },
      { rateLimit: { max: 2, windowMs: 60_000 } },
    ));

  it('lets a key submit again once its window has passed', () =>
    withEmbeddedApi(
      async (api) => {
        assert.equal((await call(api.app, 'POST', '/v1/jobs', { key: api.acmeKey, body: job })).status, 202);
        assert.equal((await call(api.app, 'POST', '/v1/jobs', { key: api.acmeKey, body: job })).status, 429);
        await waitFor('the window to pass', async () => (await call(api.app, 'POST', '/v1/jobs', { key: api.acmeKey, body: job })).status === 202);
      },
      { rateLimit: { max: 1, windowMs: 200 } },
    ));

  it('off: no limit at all', () =>
    withEmbeddedApi(
      async (api) => {
        for (let n = 0; n < 20; n++) assert.equal((await call(api.app, 'POST', '/v1/jobs', { key: api.acmeKey, body: job })).status, 202);
      },
      { rateLimit: 'off' },
    ));

  it('reads 100/s, 600/min, 5000/h and off, and refuses anything else naming the forms', () => {
    assert.deepEqual(parseRateLimit('100/s'), { max: 100, windowMs: 1000 });
    assert.deepEqual(parseRateLimit(' 600 / min '), { max: 600, windowMs: 60_000 });
    assert.deepEqual(parseRateLimit('5000/hour'), { max: 5000, windowMs: 3_600_000 });
    assert.equal(parseRateLimit('OFF'), 'off');
    for (const bad of ['100', '0/s', '-1/s', '1.5/s', '100/day', 'fast', '']) {
      assert.throws(() => parseRateLimit(bad), { name: 'RangeError', message: /expected requests per key and window such as 100\/s/ }, bad);
    }
    assert.equal(formatRateLimit(defaultRateLimit), '100/s');
    assert.equal(formatRateLimit(parseRateLimit('7/min')), '7/min');
  });
});
