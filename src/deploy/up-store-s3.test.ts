/**
 * `planrun up --store s3://… --store-endpoint … --store-path-style`, as a user runs it with
 * MinIO or R2: the credentials come from the AWS environment, the workers `up` starts get
 * none of their own (they upload through the URLs in their fence answers). A checksum job
 * ends finished with an s3:// output in the store, the orchestrator's output folder stays
 * empty, and `planrun download` from another folder gets the very bytes, sha256 verified;
 * an object overwritten in the store after the settle is refused (exit 65), nothing kept.
 * The S3-protocol server (s3rver) runs in this process on a free port.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { GetObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { startS3Server, testS3Credentials, type TestS3Server } from '../../test/testing/s3-server.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { makeTestClip } from '../../test/testing/test-clip.js';
import { runCli, startUp, type UpProcess } from '../../test/testing/up-process.js';
import { Client } from '../client/client.js';
import { ApiErrorCode, isPlanrunApiError } from '../client/errors.js';
import { CHECKSUM_OUTPUT_FILE } from '../job-types/checksum.js';

function withoutAws(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(env).filter(([name]) => !name.startsWith('AWS_')));
}

describe('planrun up with an S3 store', () => {
  const upDir = tempDir('planrun-up-s3-');
  const appDir = tempDir('planrun-app-');
  let s3: TestS3Server;
  let up: UpProcess;

  before(async () => {
    s3 = await startS3Server();
    up = await startUp(
      upDir.path,
      ['--heartbeat-interval', '500ms', '--lease-ttl', '3s', '--store', `s3://${s3.bucket}/up`, '--store-endpoint', s3.endpoint, '--store-path-style'],
      { ...withoutAws(process.env), ...s3.env },
    );
  });

  after(async () => {
    await up?.stop();
    await s3?.stop();
    upDir.remove();
    appDir.remove();
  });

  it('prints the store in its banner; a job’s output is stored under s3://, and planrun download gets its bytes', async () => {
    assert.match(up.output(), new RegExp(`outputs\\s+s3://${s3.bucket}/up`));
    const text = `hello from the up-with-a-store test ${process.pid}`;
    const client = ['--url', up.url, '--key', up.key];
    const submitted = await runCli(['submit', 'checksum', '--input', JSON.stringify({ text }), '--wait', ...client], upDir.path, withoutAws(process.env));
    assert.equal(submitted.status, 0, submitted.stderr + submitted.stdout);
    assert.match(submitted.stdout, /finished/);
    const jobId = submitted.stdout.split('\n')[0]!.trim();
    const status = await runCli(['status', jobId, '--json', ...client], upDir.path, withoutAws(process.env));
    const job = JSON.parse(status.stdout) as { state: string; attempt: number; tenant: string; result?: { outputs?: Record<string, string> } };
    assert.equal(job.state, 'finished', status.stdout);
    const key = `up/${job.tenant}/${jobId}/${job.attempt}/${CHECKSUM_OUTPUT_FILE}`;
    assert.deepEqual(job.result?.outputs, { [CHECKSUM_OUTPUT_FILE]: `s3://${s3.bucket}/${key}` });

    // In the store, with the bytes the job wrote; nothing in the orchestrator's output folder.
    const expected = Buffer.from(`${createHash('sha256').update(text).digest('hex')}  -\n`);
    const reader = new S3Client({ endpoint: s3.endpoint, forcePathStyle: true, region: 'us-east-1', credentials: testS3Credentials });
    const object = await reader.send(new GetObjectCommand({ Bucket: s3.bucket, Key: key }));
    const stored = Buffer.from(await object.Body!.transformToByteArray());
    reader.destroy();
    assert.deepEqual(stored, expected);
    const outputFolder = join(upDir.path, '.planrun', 'outputs');
    assert.deepEqual(existsSync(outputFolder) ? readdirSync(outputFolder) : [], [], 'nothing stored in the folder store');

    // planrun download from another folder, with no AWS credential: through the API's redirect.
    const download = await runCli(['download', jobId, '--out', 'got', ...client], appDir.path, withoutAws(process.env));
    assert.equal(download.status, 0, download.stderr + download.stdout);
    assert.deepEqual(readFileSync(join(appDir.path, 'got', CHECKSUM_OUTPUT_FILE)), expected);
    const sha = createHash('sha256').update(expected).digest('hex');
    assert.match(download.stdout, new RegExp(`${CHECKSUM_OUTPUT_FILE.replace('.', '\\.')}\\s+${expected.length} bytes\\s+sha256 ${sha}  \\(verified\\)`));
  });

  it('names the object as { s3:// location, bytes, sha256 }; an object overwritten after the settle is refused by download and Client.download, nothing kept', async () => {
    const text = `tampered in the store ${process.pid}`;
    const client = ['--url', up.url, '--key', up.key];
    const submitted = await runCli(['submit', 'checksum', '--input', JSON.stringify({ text }), '--wait', ...client], upDir.path, withoutAws(process.env));
    assert.equal(submitted.status, 0, submitted.stderr + submitted.stdout);
    const jobId = submitted.stdout.split('\n')[0]!.trim();
    const job = await new Client({ url: up.url, key: up.key }).get(jobId);
    const key = `up/${job.tenant}/${jobId}/${job.attempt}/${CHECKSUM_OUTPUT_FILE}`;
    const expected = Buffer.from(`${createHash('sha256').update(text).digest('hex')}  -\n`);
    const sha256 = createHash('sha256').update(expected).digest('hex');
    assert.deepEqual(job.result?.outputFiles, { [CHECKSUM_OUTPUT_FILE]: { location: `s3://${s3.bucket}/${key}`, bytes: expected.length, sha256 } });

    // Someone with the store's credentials overwrites the object: same size, other bytes.
    const tampered = Buffer.from(expected.toString().toUpperCase());
    const writer = new S3Client({ endpoint: s3.endpoint, forcePathStyle: true, region: 'us-east-1', credentials: testS3Credentials });
    await writer.send(new PutObjectCommand({ Bucket: s3.bucket, Key: key, Body: tampered }));
    writer.destroy();
    const got = createHash('sha256').update(tampered).digest('hex');

    const download = await runCli(['download', jobId, '--out', 'tampered', ...client], appDir.path, withoutAws(process.env));
    assert.equal(download.status, 65, download.stderr + download.stdout);
    assert.match(
      download.stderr,
      new RegExp(`output "${CHECKSUM_OUTPUT_FILE}" of job ${jobId} is not what its result names: expected sha256 ${sha256}, got sha256 ${got}`),
    );
    assert.deepEqual(readdirSync(join(appDir.path, 'tampered')), [], 'nothing under the final name, no partial file');

    const outDir = join(appDir.path, 'by-client');
    await assert.rejects(new Client({ url: up.url, key: up.key }).download(jobId, { outDir }), (error: unknown) => {
      assert.ok(isPlanrunApiError(error));
      assert.equal(error.code, ApiErrorCode.outputMismatch);
      assert.match(error.message, new RegExp(`expected sha256 ${sha256}, got sha256 ${got}`));
      return true;
    });
    assert.deepEqual(readdirSync(outDir), []);
  });

  it('submit transcode --file uploads a local clip through POST /v1/uploads, and the worker renders it from the store', async () => {
    makeTestClip(appDir.path);
    const clip = readFileSync(join(appDir.path, 'clip.mp4'));

    const client = ['--url', up.url, '--key', up.key];
    const input = JSON.stringify({ renditions: [{ name: 'tiny', height: 32 }] });
    const submitted = await runCli(['submit', 'transcode', '--file', 'clip.mp4', '--input', input, '--wait', ...client], appDir.path, withoutAws(process.env));
    assert.equal(submitted.status, 0, submitted.stderr + submitted.stdout);
    const uploaded = new RegExp(`uploaded clip\\.mp4 \\([^)]+\\) to (s3://${s3.bucket}/up/local/uploads/[0-9a-f-]{36}/clip\\.mp4)`).exec(submitted.stderr);
    assert.ok(uploaded, submitted.stderr);
    const [jobId, final] = submitted.stdout.trim().split('\n');
    assert.match(final!, /finished, attempt 1\/3/);
    assert.match(submitted.stdout, new RegExp(`output: tiny\\.mp4 s3://${s3.bucket}/up/local/${jobId}/1/tiny\\.mp4`));

    const status = await runCli(['status', jobId!, '--json', ...client], appDir.path, withoutAws(process.env));
    const job = JSON.parse(status.stdout) as { result: { data: { source: string; renditions: Array<{ height: number }> } } };
    assert.match(job.result.data.source, /\/inputs\/source\/clip\.mp4$/, 'the job read the clip the worker fetched into its scratch folder');
    assert.deepEqual(
      job.result.data.renditions.map((rendition) => rendition.height),
      [32],
    );

    // The upload is in the store with the clip's bytes; the rendition is there too.
    const reader = new S3Client({ endpoint: s3.endpoint, forcePathStyle: true, region: 'us-east-1', credentials: testS3Credentials });
    const read = async (key: string) =>
      Buffer.from(await (await reader.send(new GetObjectCommand({ Bucket: s3.bucket, Key: key }))).Body!.transformToByteArray());
    assert.deepEqual(await read(uploaded[1]!.slice(`s3://${s3.bucket}/`.length)), clip);
    assert.ok((await read(`up/local/${jobId}/1/tiny.mp4`)).length > 0);
    reader.destroy();
  });
});
