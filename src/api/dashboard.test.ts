/**
 * The dashboard's files as the orchestrator serves them: the app at `/` without a key,
 * its client routes answered with the same page, its hashed assets cached for good and its
 * page never, and the API's answers untouched (a missing API route stays a JSON 404).
 */
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startEmbeddedApi, type ApiFixture } from '../../test/api/fixture.js';
import { dashboardDir } from './dashboard.js';

const html = { accept: 'text/html,application/xhtml+xml,*/*;q=0.8' };

describe('the dashboard at /', () => {
  let api: ApiFixture;
  before(async () => {
    api = await startEmbeddedApi();
  });
  after(() => api.close());

  it('serves its page at / without a key, revalidated on every visit', async () => {
    const response = await fetch(`${api.url}/`, { headers: html });
    assert.equal(response.status, 200);
    assert.match(response.headers.get('content-type') ?? '', /^text\/html/);
    assert.equal(response.headers.get('cache-control'), 'no-cache');
    assert.match(await response.text(), /<div id="root"><\/div>/);
  });

  it('serves its hashed assets as immutable', async () => {
    const asset = readdirSync(join(dashboardDir, 'assets')).find((name) => name.endsWith('.js'));
    assert.ok(asset, `no .js in ${dashboardDir}assets`);
    const response = await fetch(`${api.url}/assets/${asset}`);
    assert.equal(response.status, 200);
    assert.match(response.headers.get('content-type') ?? '', /javascript/);
    assert.equal(response.headers.get('cache-control'), 'public, max-age=31536000, immutable');
  });

  it("answers a browser on one of the app's pages with the app's page", async () => {
    for (const path of ['/jobs', '/jobs/0b8f0c4e-2b4e-4a51-9c43-6a0b1f3d2c11', '/failures?x=1']) {
      const response = await fetch(`${api.url}${path}`, { headers: html });
      assert.equal(response.status, 200, path);
      assert.equal(response.headers.get('cache-control'), 'no-cache', path);
      assert.match(await response.text(), /<div id="root"><\/div>/, path);
    }
  });

  it('leaves the API its own 404: a missing /v1 route, a missing asset, a request for JSON', async () => {
    for (const [path, headers] of [
      ['/v1/no-such-route', html],
      ['/assets/no-such-file.js', {}],
      ['/jobs/abc', { accept: 'application/json' }],
    ] as const) {
      const response = await fetch(`${api.url}${path}`, { headers });
      assert.equal(response.status, 404, path);
      const body = (await response.json()) as { error: { code: string; message: string } };
      assert.equal(body.error.code, 'not_found', path);
    }
  });

  it('keeps the API behind its key', async () => {
    const response = await fetch(`${api.url}/v1/jobs`, { headers: html });
    assert.equal(response.status, 401);
  });
});
