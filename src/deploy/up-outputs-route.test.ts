/**
 * The folder-store half of `GET /v1/jobs/:id/outputs/*`, on `planrun up` with no store:
 * the outputs land in the data dir's output folder, which the orchestrator can read, so
 * the route streams the file itself to the job's owner. Another tenant, a name the job
 * has not got, a name that climbs out with `..`, and a stored output that leads outside
 * the output folder (a link to the data dir's key file) are all a 404 that carries none
 * of the bytes.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { tempDir } from '../../test/testing/temp-dir.js';
import { runCli, startUp, type UpProcess } from '../../test/testing/up-process.js';
import { cliPath } from '../../test/testing/worker-process.js';
import { CHECKSUM_OUTPUT_FILE } from '../job-types/checksum.js';

describe('planrun up with the folder store: the outputs route', () => {
  const upDir = tempDir('planrun-up-outputs-');
  let up: UpProcess;
  let otherKey: string;

  before(async () => {
    const dataDir = join(upDir.path, '.planrun');
    otherKey = spawnSync(process.execPath, [cliPath, 'keys', 'create', '--tenant', 'other', '--data-dir', dataDir], { encoding: 'utf8' })
      .stdout.trim()
      .split('\n')
      .pop()!;
    up = await startUp(upDir.path, ['--heartbeat-interval', '500ms', '--lease-ttl', '3s'], process.env);
  });

  after(async () => {
    await up?.stop();
    upDir.remove();
  });

  it('streams an output to its owner; another tenant, a missing name, and a way out of the output folder are 404', async () => {
    const text = `hello from the outputs route test ${process.pid}`;
    const client = ['--url', up.url, '--key', up.key];
    const submitted = await runCli(['submit', 'checksum', '--input', JSON.stringify({ text }), '--wait', ...client], upDir.path);
    assert.equal(submitted.status, 0, submitted.stderr + submitted.stdout);
    const id = submitted.stdout.split('\n')[0]!.trim();
    const status = await runCli(['status', id, '--json', ...client], upDir.path);
    const job = JSON.parse(status.stdout) as { state: string; result?: { outputs?: Record<string, string> } };
    assert.equal(job.state, 'finished', status.stdout);
    const location = job.result!.outputs![CHECKSUM_OUTPUT_FILE]!;
    const path = location.startsWith('file://') ? fileURLToPath(location) : location;
    assert.ok(realpathSync(path).startsWith(realpathSync(join(upDir.path, '.planrun', 'outputs'))), `${path} is in the output folder`);
    const expected = Buffer.from(`${createHash('sha256').update(text).digest('hex')}  -\n`);
    assert.deepEqual(readFileSync(path), expected);

    const get = (name: string, key: string) =>
      fetch(`${up.url}/v1/jobs/${id}/outputs/${name}`, { headers: { authorization: `Bearer ${key}` }, redirect: 'manual' });
    const own = await get(CHECKSUM_OUTPUT_FILE, up.key);
    assert.equal(own.status, 200);
    assert.equal(own.headers.get('content-type'), 'application/octet-stream');
    assert.equal(own.headers.get('content-disposition'), `attachment; filename="${CHECKSUM_OUTPUT_FILE}"`);
    assert.deepEqual(Buffer.from(await own.arrayBuffer()), expected);

    const localKey = readFileSync(join(upDir.path, '.planrun', 'local-key'), 'utf8').trim();
    const refused = async (name: string, key: string, why: string) => {
      const response = await get(name, key);
      const body = await response.text();
      assert.equal(response.status, 404, `${why}: ${body}`);
      assert.doesNotMatch(body, new RegExp(expected.toString().slice(0, 64)), `${why}: none of the output`);
      assert.equal(body.includes(localKey), false, `${why}: not the key file`);
    };
    await refused(CHECKSUM_OUTPUT_FILE, otherKey, "another tenant's job");
    await refused('nope.txt', up.key, 'a name the job has not got');
    await refused('..%2F..%2F..%2F..%2Flocal-key', up.key, 'a name that climbs out of the job’s folder');
    await refused(`..%2F1%2F${CHECKSUM_OUTPUT_FILE}`, up.key, 'a name that climbs into the attempt folder');

    // The stored output now leads outside the output folder: the route follows no such link.
    rmSync(path);
    symlinkSync(join(upDir.path, '.planrun', 'local-key'), path);
    await refused(CHECKSUM_OUTPUT_FILE, up.key, 'an output that is a link out of the output folder');

    // The CLI goes through the same route, and also refuses it.
    const download = await runCli(['download', id, '--out', 'got', ...client], upDir.path);
    assert.notEqual(download.status, 0, download.stdout);
    assert.equal(download.stdout.includes(localKey), false);
    assert.equal(existsSync(join(upDir.path, 'got', CHECKSUM_OUTPUT_FILE)), false, 'nothing written by the refused download');
  });
});
