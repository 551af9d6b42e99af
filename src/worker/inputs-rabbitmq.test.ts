/**
 * Inputs by URL (issue 11), with a real worker on RabbitMQ and an orchestrator keeping
 * its store in an S3-protocol server (s3rver, in this process on a free port). The job
 * type `read-input` declares its `file` field an input file: the worker fetches it into
 * the job's scratch folder before the run, the `s3://` ones through presigned GETs the
 * orchestrator hands a live lease, for keys under the job's own tenant only.
 */
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import type { Job } from '../ledger/ledger.js';
import { forgeControlRequest } from '../../test/testing/control-forgery.js';
import { freePort } from '../../test/testing/free-port.js';
import { Harness } from '../../test/testing/harness.js';
import { rabbitMqConnections } from '../../test/testing/rabbitmq-connections.js';
import { startS3Server, type TestS3Server } from '../../test/testing/s3-server.js';
import { waitFor } from '../../test/testing/wait.js';
import { readInputMaxBytes, type ReadInputData } from '../../test/worker/fixtures/input-jobs.js';
import type { S3OutputStore } from '../orchestrator/object-store.js';

const inputJobsModule = fileURLToPath(new URL('../../test/worker/fixtures/input-jobs.js', import.meta.url));

async function putUpload(store: S3OutputStore, tenant: string, name: string, bytes: Buffer): Promise<string> {
  const key = store.uploadKeyOf(tenant, `u${bytes.length}`, name);
  const response = await fetch(await store.presignUpload(key, bytes.length, 60_000), { method: 'PUT', body: bytes });
  assert.equal(response.status, 200, await response.text());
  return store.locationOf(key);
}

function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/**
 * An HTTP server answering each path of `files` with its bytes, chunked (no
 * Content-Length): a size shows only as it streams. `/held.bin` answers once `release` is
 * called; `/stalled.bin` sends a first chunk and then nothing.
 */
async function startHttpServer(files: Record<string, Buffer>): Promise<{ server: Server; url: string; release(): void }> {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const server = createServer((request, response) => {
    const path = new URL(request.url ?? '/', 'http://x').pathname;
    if (path === '/held.bin') return void released.then(() => response.end('held\n'));
    if (path === '/stalled.bin') {
      // A first chunk, then nothing: the fetch waits (until its idle timeout, or an abort).
      response.writeHead(200);
      return void response.write(Buffer.alloc(512, 1));
    }
    const body = files[path];
    if (!body) return void response.writeHead(404).end();
    response.writeHead(200, { 'content-type': 'application/octet-stream' });
    response.write(body.subarray(0, body.length >> 1));
    response.end(body.subarray(body.length >> 1));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, release };
}

describe('inputs by URL, fetched by the worker (RabbitMQ, s3rver)', () => {
  let connections: Awaited<ReturnType<typeof rabbitMqConnections>>;
  let s3: TestS3Server;
  let store: S3OutputStore;
  let harness: Harness;
  let storeless: Harness;
  let http: Awaited<ReturnType<typeof startHttpServer>>;
  const small = Buffer.from(`the bytes of a small input ${process.pid}\n`.repeat(10));

  before(async () => {
    connections = await rabbitMqConnections();
    s3 = await startS3Server();
    store = s3.store('in');
    harness = await new Harness({ broker: await connections.connect(), objectStore: store }).start();
    await harness.startWorker(await connections.connect(), { jobModules: [inputJobsModule] });
    storeless = await new Harness({ broker: await connections.connect() }).start();
    await storeless.startWorker(await connections.connect(), { jobModules: [inputJobsModule] });
    http = await startHttpServer({ '/small.bin': small, '/big.bin': Buffer.alloc(readInputMaxBytes + 1, 7) });
  });

  after(async () => {
    await harness?.close();
    await storeless?.close();
    await connections?.close();
    await s3?.stop();
    http?.release();
    http?.server.closeAllConnections();
    http?.server.close();
  });

  async function run(on: Harness, tenant: string, file: string, maxAttempts = 1): Promise<Job> {
    const { job } = await on.orchestrator.submit({ tenant, type: 'read-input', input: { file, runLog: on.runLog }, maxAttempts });
    return waitFor(`job ${job.id} to end`, async () => {
      const now = await on.ledger.getJob(job.id);
      return now?.state === 'finished' || now?.state === 'failed' ? now : undefined;
    });
  }

  function assertFailedUnrun(on: Harness, job: Job, code: string, named: string): void {
    assert.equal(job.state, 'failed', JSON.stringify(job));
    assert.equal(job.failureReason, 'permanent');
    assert.equal(job.error?.class, 'permanent');
    assert.equal(job.error?.code, code, job.error?.message);
    assert.ok(job.error?.message.includes(named), `the error names ${named}: ${job.error?.message}`);
    assert.equal(job.attempt, 1, 'a permanent error is not retried');
    assert.deepEqual(on.runs(job.id), [], "the job's code never ran");
  }

  it("an s3:// input of the tenant's own upload is fetched, and the job sees a local file with its bytes", async () => {
    const location = await putUpload(store, 'acme', 'clip one.bin', small);
    assert.equal(location, `s3://${s3.bucket}/in/acme/uploads/u${small.length}/clip one.bin`);
    const job = await run(harness, 'acme', location);
    assert.equal(job.state, 'finished', JSON.stringify(job.error));
    const data = job.result?.data as ReadInputData;
    assert.equal(data.inScratch, true, `the job got a path in its scratch folder: ${data.file}`);
    assert.match(data.file, /\/inputs\/file\/clip_one\.bin$/);
    assert.equal(data.bytes, small.length);
    assert.equal(data.sha256, sha256(small));
    assert.deepEqual(data.fetched, ['file/clip_one.bin'], 'the fetched file alone, no partial file beside it');
    assert.deepEqual(job.input, { file: location, runLog: harness.runLog }, 'the job as recorded keeps the URL it was given');
  });

  it('an http(s):// input is fetched as is (a 404 is input_missing); a local path is left as it is', async () => {
    const fetched = await run(harness, 'acme', `${http.url}/small.bin?v=1`);
    assert.equal(fetched.state, 'finished', JSON.stringify(fetched.error));
    const got = fetched.result?.data as ReadInputData;
    assert.match(got.file, /\/inputs\/file\/small\.bin$/);
    assert.equal(got.sha256, sha256(small));
    const missing = `${http.url}/gone.bin`;
    assertFailedUnrun(harness, await run(harness, 'acme', missing), 'input_missing', missing);
    const local = await run(harness, 'acme', inputJobsModule);
    assert.equal(local.state, 'finished', JSON.stringify(local.error));
    const data = local.result?.data as ReadInputData;
    assert.equal(data.file, inputJobsModule);
    assert.equal(data.inScratch, false);
    assert.deepEqual(data.fetched, []);
  });

  it("another tenant's key, another bucket, a key climbing out with .., and a store-less orchestrator: refused Permanent, naming the URL", async () => {
    const acmes = await putUpload(store, 'acme', 'secret.bin', small);
    assertFailedUnrun(harness, await run(harness, 'other', acmes), 'input_refused', acmes);
    const elsewhere = `s3://another-bucket/in/other/uploads/x/secret.bin`;
    assertFailedUnrun(harness, await run(harness, 'other', elsewhere), 'input_refused', elsewhere);
    const climbing = acmes.replace('/in/acme/', '/in/other/../acme/');
    assertFailedUnrun(harness, await run(harness, 'other', climbing), 'input_refused', climbing);
    assertFailedUnrun(storeless, await run(storeless, 'acme', acmes), 'input_refused', acmes);
  });

  it('an outsider on the broker asking for the input URLs of a running job, with a guessed token, gets none', async () => {
    const acmes = await putUpload(store, 'acme', 'private.bin', small);
    const { job } = await harness.orchestrator.submit({ tenant: 'acme', type: 'read-input', input: { file: `${http.url}/held.bin` } });
    await waitFor('the job to run (its worker fetching the held input)', async () => (await harness.ledger.getJob(job.id))?.state === 'running');
    const outsider = await connections.connect();
    const forged = await forgeControlRequest(outsider, harness.topology, {
      op: 'inputs',
      jobId: job.id,
      attempt: 1,
      tenant: 'acme',
      token: randomUUID(),
      locations: [acmes],
    });
    assert.deepEqual(forged, { op: 'inputs', jobId: job.id, attempt: 1, live: false, reason: 'superseded' });
    http.release();
    const ended = await waitFor('the job to finish', async () => {
      const now = await harness.ledger.getJob(job.id);
      return now?.state === 'finished' ? now : undefined;
    });
    assert.equal((ended.result?.data as ReadInputData).bytes, 'held\n'.length);
  });

  it('a job cancelled while its input is fetched: the fetch stops, the job is settled cancelled, its code never ran', async () => {
    const { job } = await harness.orchestrator.submit({
      tenant: 'acme',
      type: 'read-input',
      input: { file: `${http.url}/stalled.bin`, runLog: harness.runLog },
    });
    await waitFor('the job to run (its worker fetching the stalled input)', async () => (await harness.ledger.getJob(job.id))?.state === 'running');
    await harness.orchestrator.cancel(job.id, 'acme');
    const ended = await waitFor('the job to end', async () => {
      const now = await harness.ledger.getJob(job.id);
      return now?.state === 'failed' ? now : undefined;
    });
    assert.equal(ended.failureReason, 'cancelled');
    assert.equal(ended.attempt, 1);
    assert.deepEqual(harness.runs(job.id), [], "the job's code never ran");
  });

  it('a missing object is Permanent input_missing, naming it; a URL that does not parse is Permanent invalid_input', async () => {
    const missing = store.locationOf(store.uploadKeyOf('acme', 'nope', 'missing.bin'));
    assertFailedUnrun(harness, await run(harness, 'acme', missing), 'input_missing', missing);
    assertFailedUnrun(harness, await run(harness, 'acme', 'http://exa mple.com/clip.mp4'), 'invalid_input', 'input field file');
  });

  it('over the size cap is Permanent input_too_large, whether the size is announced (S3) or only streams (chunked HTTP)', async () => {
    const big = await putUpload(store, 'acme', 'big.bin', Buffer.alloc(readInputMaxBytes + 1, 7));
    assertFailedUnrun(harness, await run(harness, 'acme', big), 'input_too_large', big);
    const streamed = `${http.url}/big.bin`;
    assertFailedUnrun(harness, await run(harness, 'acme', streamed), 'input_too_large', streamed);
  });

  it('an unreachable URL (a closed port) is Transient input_unreachable, retried until the attempts run out', async () => {
    const closed = `http://127.0.0.1:${await freePort()}/clip.mp4`;
    const job = await run(harness, 'acme', closed, 2);
    assert.equal(job.state, 'failed');
    assert.equal(job.failureReason, 'exhausted');
    const attempts = await harness.ledger.getAttempts(job.id);
    assert.deepEqual(
      attempts.map((attempt) => [attempt.attempt, attempt.error?.class, attempt.error?.code]),
      [
        [1, 'transient', 'input_unreachable'],
        [2, 'transient', 'input_unreachable'],
      ],
    );
    assert.ok(attempts[0]!.error!.message.includes(closed), attempts[0]!.error!.message);
    assert.deepEqual(harness.runs(job.id), [], "the job's code never ran");
  });
});
