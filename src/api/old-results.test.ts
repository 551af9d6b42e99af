/**
 * A result stored before results carried `outputFiles` (a worker of an earlier version
 * settles with `outputs` alone): the API still serves it, with `outputs` as stored and
 * `outputFiles` normalised on read (a `file://` location, no size or sha256, which were
 * never recorded); the output route streams it, and `Client.download` fetches it, saying it
 * could not be verified.
 */
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, it } from 'node:test';
import { call, withEmbeddedApi } from '../../test/api/fixture.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { waitFor } from '../../test/testing/wait.js';
import { Client } from '../client/client.js';

describe('a result stored before outputFiles', () => {
  it('is served with outputs as stored and outputFiles normalised; its output streams and downloads, unverified', () =>
    withEmbeddedApi(
      async (api) => {
        const { ledger } = api.harness;
        const submitted = await call(api.app, 'POST', '/v1/jobs', { key: api.acmeKey, body: { type: 'probe', input: {} } });
        const id = submitted.body.id as string;
        const granted = await ledger.grantLease({ jobId: id, attempt: 1, worker: 'old-worker' });
        assert.ok(granted.granted);
        const path = join(api.harness.outputRoot, 'acme', id, '1', 'old.txt');
        mkdirSync(join(path, '..'), { recursive: true });
        writeFileSync(path, 'stored by an older worker\n');
        // The settle an older worker sends: outputs only.
        const settled = await ledger.settle({
          jobId: id,
          attempt: 1,
          token: granted.token,
          outcome: { kind: 'finished', result: { data: { n: 1 }, outputs: { 'old.txt': path } } },
        });
        assert.ok(settled.accepted);

        const expectedResult = { data: { n: 1 }, outputs: { 'old.txt': path }, outputFiles: { 'old.txt': { location: pathToFileURL(path).href } } };
        const job = await call(api.app, 'GET', `/v1/jobs/${id}`, { key: api.acmeKey });
        assert.equal(job.status, 200);
        assert.deepEqual(job.body.result, expectedResult);
        const listed = await call(api.app, 'GET', '/v1/jobs', { key: api.acmeKey });
        assert.deepEqual(listed.body.jobs[0].result, expectedResult);
        const announced = await waitFor('the result message', () => api.harness.results.find((r) => r.messageId === id));
        assert.deepEqual(announced.body.result, expectedResult);

        const output = await call(api.app, 'GET', `/v1/jobs/${id}/outputs/old.txt`, { key: api.acmeKey });
        assert.equal(output.status, 200);
        assert.equal(output.body, 'stored by an older worker\n');

        const out = tempDir('planrun-old-download-');
        try {
          const written = await new Client({ url: api.url, key: api.acmeKey }).download(id, { outDir: out.path });
          assert.deepEqual(
            written.map(({ name, bytes, verified }) => ({ name, bytes, verified })),
            [{ name: 'old.txt', bytes: 26, verified: false }],
          );
          assert.equal(readFileSync(join(out.path, 'old.txt'), 'utf8'), 'stored by an older worker\n');
        } finally {
          out.remove();
        }
      },
      { serveOutputs: true },
    ));
});
