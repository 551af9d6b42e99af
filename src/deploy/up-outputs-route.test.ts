/**
 * The folder-store half of `GET /v1/jobs/:id/outputs/*`, on `planrun up` with no store:
 * the outputs land in the data dir's output folder, which the orchestrator can read, so
 * the route streams the file itself to the job's owner. Another tenant, a name the job
 * has not got, a name that climbs out with `..`, and a stored output that leads outside
 * the output folder (a link to the data dir's key file) are all a 404 that carries none
 * of the bytes. Each output is named with its size and sha256, and a download checks them:
 * a file changed after the settle is refused (exit 65), and nothing is kept.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
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

  it('names each output as { file:// location, bytes, sha256 }; download verifies them, and refuses a file changed after the settle', async () => {
    const text = `verified download ${process.pid}`;
    const client = ['--url', up.url, '--key', up.key];
    const submitted = await runCli(['submit', 'checksum', '--input', JSON.stringify({ text }), '--wait', ...client], upDir.path);
    assert.equal(submitted.status, 0, submitted.stderr + submitted.stdout);
    const id = submitted.stdout.split('\n')[0]!.trim();
    const expected = Buffer.from(`${createHash('sha256').update(text).digest('hex')}  -\n`);
    const sha256 = createHash('sha256').update(expected).digest('hex');

    const status = await runCli(['status', id, '--json', ...client], upDir.path);
    const job = JSON.parse(status.stdout) as { result: { outputs: Record<string, string>; outputFiles: Record<string, unknown> } };
    const path = job.result.outputs[CHECKSUM_OUTPUT_FILE]!;
    assert.deepEqual(job.result.outputFiles, { [CHECKSUM_OUTPUT_FILE]: { location: pathToFileURL(path).href, bytes: expected.length, sha256 } });
    const shown = await runCli(['status', id, ...client], upDir.path);
    assert.match(shown.stdout, new RegExp(`^output +${CHECKSUM_OUTPUT_FILE.replace('.', '\\.')} +${path}\n +${expected.length} bytes  sha256 ${sha256}$`, 'm'));

    const good = await runCli(['download', id, '--out', 'verified', ...client], upDir.path);
    assert.equal(good.status, 0, good.stderr + good.stdout);
    assert.match(good.stdout, new RegExp(`${expected.length} bytes  sha256 ${sha256}  \\(verified\\)`));
    assert.deepEqual(readFileSync(join(upDir.path, 'verified', CHECKSUM_OUTPUT_FILE)), expected);

    // The stored file changes after the settle: same size, other bytes; then another size.
    const tampered = Buffer.from(expected.toString().replace(/^./, (c) => (c === '0' ? '1' : '0')));
    writeFileSync(path, tampered);
    const refused = await runCli(['download', id, '--out', 'tampered', ...client], upDir.path);
    assert.equal(refused.status, 65, refused.stderr + refused.stdout);
    assert.match(
      refused.stderr,
      new RegExp(
        `output "${CHECKSUM_OUTPUT_FILE}" of job ${id} is not what its result names: expected sha256 ${sha256}, got sha256 ${createHash('sha256').update(tampered).digest('hex')}`,
      ),
    );
    assert.deepEqual(readdirSync(join(upDir.path, 'tampered')), [], 'nothing under the final name, no partial file');

    writeFileSync(path, Buffer.concat([expected, Buffer.from('more')]));
    const longer = await runCli(['download', id, '--out', 'tampered', ...client], upDir.path);
    assert.equal(longer.status, 65, longer.stderr + longer.stdout);
    assert.match(longer.stderr, new RegExp(`expected ${expected.length} bytes, got ${expected.length + 4} bytes`));
    assert.deepEqual(readdirSync(join(upDir.path, 'tampered')), []);
  });
});
