/**
 * The store cleaner with a real orchestrator, RabbitMQ and s3rver: what losing attempts
 * left under their prefixes (an attempt that uploaded and then lost its lease, a job that
 * failed) is removed after the grace, and counted in the metrics; the delivered attempt's
 * outputs stay; unfinished multipart uploads of attempts that can no longer deliver are
 * aborted, and the live attempt's one is left alone. The test plays the worker over the
 * control plane, so that it can upload with a live fence's URLs and then let the lease run out.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  CreateMultipartUploadCommand,
  GetObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import type { Broker } from '../broker/broker.js';
import type { ControlAnswer } from '../control/protocol.js';
import { forgeControlRequest } from '../../test/testing/control-forgery.js';
import { Harness } from '../../test/testing/harness.js';
import { rabbitMqConnections } from '../../test/testing/rabbitmq-connections.js';
import { startS3Server, testS3Credentials, type TestS3Server } from '../../test/testing/s3-server.js';
import { waitFor } from '../../test/testing/wait.js';
import { systemClock } from '../core/clock.js';
import { silentLogger } from '../core/logger.js';
import type { S3OutputStore } from './object-store.js';
import { StoreCleaner } from './store-cleaner.js';

const secret = 'secret-of-the-test-worker-0123456789';
const tenant = 'acme';
const graceMs = 600;

describe('the store cleaner (RabbitMQ, s3rver)', () => {
  let connections: Awaited<ReturnType<typeof rabbitMqConnections>>;
  let s3: TestS3Server;
  let store: S3OutputStore;
  let client: S3Client;
  let worker: Broker;
  let harness: Harness;

  before(async () => {
    connections = await rabbitMqConnections();
    s3 = await startS3Server();
    store = s3.store('out');
    client = new S3Client({ endpoint: s3.endpoint, forcePathStyle: true, region: 'us-east-1', credentials: testS3Credentials });
    harness = await new Harness({
      broker: await connections.connect(),
      // Presigned URLs expire in whole seconds: a lease of 2 s and a grace of 1 s give 3 s to use them.
      ledgerConfig: { leaseTtlMs: 2000, backoffBaseMs: 50 },
      objectStore: store,
      uploadGraceMs: 1000,
      storeCleanup: { graceMs, intervalMs: 100 },
    }).start();
    worker = await connections.connect();
  });
  after(async () => {
    await harness.close();
    client.destroy();
    await s3.stop();
    await connections.close();
  });

  const control = (request: Record<string, unknown>): Promise<ControlAnswer> => forgeControlRequest(worker, harness.topology, request);

  async function lease(jobId: string, attempt: number): Promise<string> {
    const answer = await waitFor(`attempt ${attempt} of ${jobId} to be granted`, async () => {
      const reply = await control({ op: 'lease', jobId, attempt, tenant, worker: 'w-test', secret });
      return reply.op === 'lease' && reply.granted ? reply : undefined;
    });
    return answer.token;
  }

  /** Fences attempt `attempt` for `files` and PUTs each with its URL; answers name -> location. */
  async function upload(jobId: string, attempt: number, token: string, files: Record<string, string>): Promise<Record<string, string>> {
    const reply = await control({
      op: 'fence',
      jobId,
      attempt,
      token,
      tenant,
      outputs: Object.entries(files).map(([name, text]) => ({ name, bytes: Buffer.byteLength(text) })),
    });
    assert.ok(reply.op === 'fence' && reply.live && reply.uploads, `a live fence with URLs: ${JSON.stringify(reply)}`);
    const locations: Record<string, string> = {};
    for (const upload of reply.uploads) {
      const { name, location } = upload;
      assert.ok('url' in upload, `${name} is small enough for one PUT`);
      const response = await fetch(upload.url, { method: 'PUT', body: Buffer.from(files[name]!) });
      assert.equal(response.status, 200, `PUT ${name}`);
      locations[name] = location;
    }
    return locations;
  }

  async function startMultipart(key: string): Promise<string> {
    const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: s3.bucket, Key: key }));
    await client.send(new UploadPartCommand({ Bucket: s3.bucket, Key: key, UploadId, PartNumber: 1, Body: Buffer.from('a part never completed') }));
    return UploadId!;
  }

  async function keysUnder(prefix: string): Promise<string[]> {
    const page = await client.send(new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: prefix }));
    return (page.Contents ?? []).map((o) => o.Key!).sort();
  }

  async function unfinished(): Promise<string[]> {
    const page = await client.send(new ListMultipartUploadsCommand({ Bucket: s3.bucket, Prefix: 'out/' }));
    return (page.Uploads ?? []).map((u) => u.Key!).sort();
  }

  async function metric(name: string): Promise<number> {
    const { body } = await harness.orchestrator.metrics.render();
    const line = body.split('\n').find((l) => l.startsWith(`${name} `));
    return Number(line?.split(' ')[1] ?? NaN);
  }

  it('removes what losing attempts uploaded after the grace, keeps the delivered outputs, aborts unfinished uploads that can no longer complete', async (t) => {
    // Job A: attempt 1 uploads two files and an unfinished multipart, then its lease runs out; attempt 2 delivers.
    const { job: a } = await harness.orchestrator.submit({ tenant, type: 'probe', input: {} });
    const a1 = await lease(a.id, 1);
    await upload(a.id, 1, a1, { 'video.mp4': 'bytes of attempt 1', 'thumbs/1.jpg': 'thumb of attempt 1' });
    await startMultipart(`out/${tenant}/${a.id}/1/big.bin`);
    assert.deepEqual(await keysUnder(`out/${tenant}/${a.id}/1/`), [`out/${tenant}/${a.id}/1/thumbs/1.jpg`, `out/${tenant}/${a.id}/1/video.mp4`]);
    await waitFor('the sweeper to move job A to attempt 2', async () => (await harness.ledger.getJob(a.id))?.attempt === 2);
    const a2 = await lease(a.id, 2);
    const delivered = await upload(a.id, 2, a2, { 'video.mp4': 'bytes of attempt 2' });
    // A multipart the delivered attempt began and never completed: the result does not name it.
    await startMultipart(`out/${tenant}/${a.id}/2/abandoned.bin`);
    const settled = await control({ op: 'settle', jobId: a.id, attempt: 2, token: a2, tenant, outcome: { kind: 'finished', result: { outputs: delivered } } });
    assert.ok(settled.op === 'settle' && settled.accepted, JSON.stringify(settled));

    // Job B: fails permanently after uploading.
    const { job: b } = await harness.orchestrator.submit({ tenant, type: 'probe', input: {} });
    const b1 = await lease(b.id, 1);
    await upload(b.id, 1, b1, { 'partial.txt': 'half an output' });
    const failed = await control({
      op: 'settle',
      jobId: b.id,
      attempt: 1,
      token: b1,
      tenant,
      outcome: { kind: 'failed', error: { class: 'permanent', code: 'bad_input', message: 'no' } },
    });
    assert.ok(failed.op === 'settle' && failed.accepted, JSON.stringify(failed));

    // Job C: running, its live attempt's multipart as old as the others: never aborted.
    const { job: c } = await harness.orchestrator.submit({ tenant, type: 'probe', input: {} });
    const c1 = await lease(c.id, 1);
    // Its worker's heartbeats keep the lease, however long the cleaner takes.
    const heartbeats = setInterval(() => {
      const leases = [{ jobId: c.id, attempt: 1, token: c1, tenant }];
      void control({ op: 'heartbeat', worker: 'w-test', secret, jobTypes: ['probe'], capabilities: [], slots: 1, leases });
    }, 300);
    t.after(() => clearInterval(heartbeats));
    await startMultipart(`out/${tenant}/${c.id}/1/growing.bin`);

    await waitFor(
      'the losing attempts’ objects to be removed',
      async () => (await keysUnder(`out/${tenant}/${a.id}/1/`)).length === 0 && (await keysUnder(`out/${tenant}/${b.id}/`)).length === 0,
      15_000,
    );
    await waitFor('the unfinished uploads of decided attempts to be aborted', async () => (await unfinished()).length === 1, 15_000);

    assert.deepEqual(await unfinished(), [`out/${tenant}/${c.id}/1/growing.bin`], 'the live attempt’s upload is left alone');
    assert.equal((await harness.ledger.getJob(c.id))?.state, 'running', 'job C held its lease throughout');
    assert.deepEqual(await keysUnder(`out/${tenant}/${a.id}/`), [`out/${tenant}/${a.id}/2/video.mp4`], 'the delivered output stays');
    const kept = await client.send(new GetObjectCommand({ Bucket: s3.bucket, Key: `out/${tenant}/${a.id}/2/video.mp4` }));
    assert.equal(await kept.Body!.transformToString(), 'bytes of attempt 2');
    assert.equal(await metric('planrun_store_objects_removed_total'), 3, 'two objects of A@1, one of B@1');
    assert.equal(await metric('planrun_store_uploads_aborted_total'), 2, 'A@1 under its prefix, A@2 as a stale upload');
  });

  it('cleaners at once split the work by their claims; removing an attempt again finds nothing and is no error', async () => {
    const { job } = await harness.orchestrator.submit({ tenant, type: 'probe', input: {} });
    const token = await lease(job.id, 1);
    await upload(job.id, 1, token, { 'one.txt': '1', 'two.txt': '22' });
    const settled = await control({
      op: 'settle',
      jobId: job.id,
      attempt: 1,
      token,
      tenant,
      outcome: { kind: 'failed', error: { class: 'permanent', code: 'bad_input', message: 'no' } },
    });
    assert.ok(settled.op === 'settle' && settled.accepted);
    const before = await metric('planrun_store_objects_removed_total');
    const counted = { objects: 0 };
    const others = [1, 2].map(
      () =>
        new StoreCleaner(
          harness.ledger,
          store,
          silentLogger(),
          systemClock,
          { graceMs },
          { objectsRemoved: (n) => (counted.objects += n), uploadsAborted: () => {} },
        ),
    );
    const removedByAll = async () => counted.objects + (await metric('planrun_store_objects_removed_total')) - before;
    // The two here and the orchestrator's own, all at once, pass after pass until the attempt is gone and
    // counted: the orchestrator's cleaner may have deleted the objects and not yet added them to its metric.
    await waitFor(
      'the attempt to be removed and counted',
      async () => {
        await Promise.all(others.map((c) => c.runOnce()));
        return (await keysUnder(`out/${tenant}/${job.id}/`)).length === 0 && (await removedByAll()) >= 2;
      },
      15_000,
      50,
    );
    await Promise.all(others.map((c) => c.runOnce()));
    assert.equal(await removedByAll(), 2, 'one cleaner took the attempt; the others got nothing to count');
    assert.deepEqual(await store.removeAttempt({ tenant, jobId: job.id, attempt: 1 }), { objects: 0, uploads: 0 }, 'removed again: nothing, no error');
  });
});
