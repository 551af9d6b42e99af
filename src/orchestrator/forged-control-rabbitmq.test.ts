/**
 * Forged control requests, sent as an outsider on the broker would (issue "Holes found by
 * probing", finding 1): to the control queue with RabbitMQ's direct reply-to, naming a
 * running job and the worker that holds it (worker names are public in the job's attempts
 * and the fleet). None may take over a lease, settle a job, complete an upload or speak for
 * a worker.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { HeadObjectCommand, ListMultipartUploadsCommand, S3Client } from '@aws-sdk/client-s3';
import type { Broker } from '../broker/broker.js';
import { Harness, type TestWorker } from '../../test/testing/harness.js';
import { forgeControlRequest } from '../../test/testing/control-forgery.js';
import { rabbitMqConnections } from '../../test/testing/rabbitmq-connections.js';
import { startS3Server, testS3Credentials, type TestS3Server } from '../../test/testing/s3-server.js';
import { waitFor } from '../../test/testing/wait.js';

const secretOfNobody = 'a-secret-the-worker-never-made-0123456789';

async function runningProbe(harness: Harness, ms: number, options: { log?: boolean } = {}) {
  const { job } = await harness.orchestrator.submit({ tenant: 't1', type: 'probe', input: { ms, steps: 20, runLog: harness.runLog, ...options } });
  const running = await waitFor('the probe job to run', async () => {
    const now = await harness.ledger.getJob(job.id);
    return now?.state === 'running' ? now : undefined;
  });
  return running;
}

describe('forged control requests on RabbitMQ', () => {
  let connections: Awaited<ReturnType<typeof rabbitMqConnections>>;
  let outsider: Broker;

  before(async () => {
    connections = await rabbitMqConnections();
    outsider = await connections.connect();
  });
  after(async () => connections.close());

  describe('an orchestrator without a fleet key', () => {
    let harness: Harness;
    let worker: TestWorker;

    before(async () => {
      harness = await new Harness({ broker: await connections.connect(), ledgerConfig: { leaseTtlMs: 30_000 } }).start();
      worker = await harness.startWorker(await connections.connect(), { slots: 1 });
    });
    after(async () => harness.close());

    it("a lease request naming a running job's worker gets no token, and a settle with a guessed one is refused", async () => {
      const job = await runningProbe(harness, 2500);
      const [attempt] = await harness.ledger.getAttempts(job.id);
      const holder = attempt!.worker;
      assert.equal(holder, worker.worker.id, 'the worker name is public in the attempts');

      // The request exactly as probed: no secret at all.
      const asProbed = await forgeControlRequest(outsider, harness.topology, { op: 'lease', jobId: job.id, attempt: 1, tenant: 't1', worker: holder });
      assert.equal(asProbed.op, 'error');
      // With a secret of its own making.
      const withSecret = await forgeControlRequest(outsider, harness.topology, {
        op: 'lease',
        jobId: job.id,
        attempt: 1,
        tenant: 't1',
        worker: holder,
        secret: secretOfNobody,
      });
      assert.deepEqual(withSecret, { op: 'lease', jobId: job.id, attempt: 1, granted: false, reason: 'already_running' });
      assert.ok(!JSON.stringify([asProbed, withSecret]).includes(job.leaseToken!), 'the live token is never sent to anyone but its holder');

      const forgedSettle = await forgeControlRequest(outsider, harness.topology, {
        op: 'settle',
        jobId: job.id,
        attempt: 1,
        tenant: 't1',
        token: randomUUID(),
        outcome: { kind: 'finished', result: { outputs: { 'sleep-output.bin': '/etc/passwd' } } },
      });
      assert.deepEqual(forgedSettle, { op: 'settle', jobId: job.id, attempt: 1, accepted: false, reason: 'superseded' });

      const ended = await waitFor('the real worker to finish the job', async () => {
        const now = await harness.ledger.getJob(job.id);
        return now?.state === 'finished' ? now : undefined;
      });
      assert.notEqual(ended.result?.outputs?.['sleep-output.bin'], '/etc/passwd');
      assert.ok(ended.result?.outputs?.['probe-output.txt'], "the stored result is the real worker's");
      assert.deepEqual(
        (await harness.ledger.getAttempts(job.id)).map((a) => [a.worker, a.outcome]),
        [[holder, 'finished']],
      );
      await waitFor('its one result message', () => harness.resultsFor(job.id).length === 1);
    });

    it("forged log lines for a running job are refused, of another tenant's too, and never show in its log; the real worker's do", async () => {
      const job = await runningProbe(harness, 1500, { log: true });
      const lines = [{ at: Date.now(), stream: 'stdout', message: 'a forged line' }];
      const guessed = await forgeControlRequest(outsider, harness.topology, {
        op: 'logs',
        jobId: job.id,
        attempt: 1,
        tenant: 't1',
        token: randomUUID(),
        lines,
      });
      assert.deepEqual(guessed, { op: 'logs', jobId: job.id, attempt: 1, accepted: false, reason: 'superseded' });
      // Even the live token (read here from the ledger) names no job under another tenant.
      const otherTenant = await forgeControlRequest(outsider, harness.topology, {
        op: 'logs',
        jobId: job.id,
        attempt: 1,
        tenant: 't2',
        token: job.leaseToken,
        lines,
      });
      assert.deepEqual(otherTenant, { op: 'logs', jobId: job.id, attempt: 1, accepted: false, reason: 'unknown_job' });
      await waitFor('the real worker to finish the job', async () => (await harness.ledger.getJob(job.id))?.state === 'finished');
      const late = await forgeControlRequest(outsider, harness.topology, { op: 'logs', jobId: job.id, attempt: 1, tenant: 't1', token: job.leaseToken, lines });
      assert.deepEqual(late, { op: 'logs', jobId: job.id, attempt: 1, accepted: false, reason: 'ended' }, 'the lease ended with the job');
      const logs = await harness.ledger.readLogs({ jobId: job.id, attempt: 1 });
      const messages = [...logs.head, ...logs.tail].map((line) => line.message);
      assert.ok(!messages.includes('a forged line'), messages.join('\n'));
      assert.deepEqual(
        messages.filter((m) => m.startsWith('step ')),
        Array.from({ length: 20 }, (_, i) => `step ${i + 1}`),
        "the real worker's ctx.log lines, every one",
      );
    });

    it("a heartbeat naming a live worker, from another process, is refused and leaves the worker's fleet entry as it was", async () => {
      await waitFor('the worker in the fleet', () => harness.orchestrator.fleet.list().some((m) => m.worker === worker.worker.id));
      const forged = await forgeControlRequest(outsider, harness.topology, {
        op: 'heartbeat',
        worker: worker.worker.id,
        secret: secretOfNobody,
        jobTypes: [],
        capabilities: [],
        slots: 0,
        leases: [],
      });
      assert.equal(forged.op, 'error');
      assert.equal((forged as { code: string }).code, 'worker_conflict');
      const member = harness.orchestrator.fleet.list().find((m) => m.worker === worker.worker.id);
      assert.deepEqual(member?.jobTypes, ['probe'], 'the worker still offers its types');
      const { job } = await harness.orchestrator.submit({ tenant: 't1', type: 'probe', input: { ms: 10, runLog: harness.runLog } });
      assert.equal(job.state, 'queued', 'routing still sees the real worker');
      await waitFor('the job to finish', async () => (await harness.ledger.getJob(job.id))?.state === 'finished');
    });
  });

  describe('an orchestrator with a fleet key', () => {
    const fleetKey = 'the-fleet-key-of-this-test-0123456789';
    let harness: Harness;

    before(async () => {
      harness = await new Harness({ broker: await connections.connect(), fleetKey, ledgerConfig: { leaseTtlMs: 30_000 } }).start();
      await harness.startWorker(await connections.connect(), { slots: 1, fleetKey });
      await waitFor('the keyed worker in the fleet', () => harness.orchestrator.fleet.list().length === 1);
    });
    after(async () => harness.close());

    it('a ghost heartbeat without the key does not enter the fleet: a type only the ghost offers is unroutable', async () => {
      const ghost = await forgeControlRequest(outsider, harness.topology, {
        op: 'heartbeat',
        worker: 'ghost-worker',
        secret: secretOfNobody,
        jobTypes: ['ghost-type'],
        capabilities: [],
        slots: 4,
        leases: [],
      });
      assert.equal((ghost as { code?: string }).code, 'unauthorized');
      assert.ok(!harness.orchestrator.fleet.list().some((m) => m.worker === 'ghost-worker'));
      const { job } = await harness.orchestrator.submit({ tenant: 't1', type: 'ghost-type', input: {} });
      assert.deepEqual([job.state, job.failureReason], ['failed', 'unroutable']);
    });

    it("a lease request from 'evil' for a queued job without the key is refused and learns nothing of the input", async () => {
      // Recorded straight in the ledger, so no worker takes it first.
      const { job } = await harness.ledger.submit({ tenant: 't1', type: 'not-consumed', input: { secret: 'the input' } });
      const answer = await forgeControlRequest(outsider, harness.topology, {
        op: 'lease',
        jobId: job.id,
        attempt: 1,
        tenant: 't1',
        worker: 'evil',
        secret: secretOfNobody,
      });
      assert.equal((answer as { code?: string }).code, 'unauthorized');
      assert.ok(!JSON.stringify(answer).includes('the input'));
      assert.equal((await harness.ledger.getJob(job.id))?.state, 'queued');
      const wrongKey = await forgeControlRequest(
        outsider,
        harness.topology,
        { op: 'lease', jobId: job.id, attempt: 1, tenant: 't1', worker: 'evil', secret: secretOfNobody },
        { fleetKey: 'a-guess' },
      );
      assert.equal((wrongKey as { code?: string }).code, 'unauthorized');
      const logs = await forgeControlRequest(outsider, harness.topology, {
        op: 'logs',
        jobId: job.id,
        attempt: 1,
        tenant: 't1',
        token: randomUUID(),
        lines: [{ at: Date.now(), stream: 'stdout', message: 'a forged line' }],
      });
      assert.equal((logs as { code?: string }).code, 'unauthorized', 'log lines without the key too');
    });

    it('a worker started without the key stops as Fatal, saying the orchestrator refuses it', async () => {
      const fatal: unknown[] = [];
      const keyless = await harness.startWorker(await connections.connect(), { slots: 1, onFatal: (error) => fatal.push(error) });
      await waitFor('the keyless worker to stop', () => fatal.length === 1);
      assert.equal((fatal[0] as { code: string }).code, 'unauthorized');
      assert.ok(keyless.events.some((e) => e.type === 'fatal'));
      assert.equal(harness.orchestrator.fleet.list().length, 1, 'only the keyed worker is in the fleet');
    });
  });
  describe('an orchestrator with an object store and a fleet key', () => {
    const fleetKey = 'the-fleet-key-of-the-store-test-0123456789';
    let harness: Harness;
    let s3: TestS3Server;
    let reader: S3Client;

    before(async () => {
      s3 = await startS3Server();
      reader = new S3Client({ endpoint: s3.endpoint, forcePathStyle: true, region: 'us-east-1', credentials: testS3Credentials });
      harness = await new Harness({
        broker: await connections.connect(),
        fleetKey,
        objectStore: s3.store('forged', { partSize: 5 * 1024 * 1024 }),
        ledgerConfig: { leaseTtlMs: 30_000 },
      }).start();
      await harness.startWorker(await connections.connect(), { slots: 1, fleetKey });
    });
    after(async () => {
      await harness.close();
      reader.destroy();
      await s3.stop();
    });

    it("a forged complete or renew of a running job's multipart upload is refused, and nothing of it becomes visible", async () => {
      const job = await runningProbe(harness, 2500);
      const ref = { tenant: 't1', jobId: job.id, attempt: 1 };
      // The upload a live fence would have created for the holder, its id leaked to the forger.
      const [upload] = await harness.orchestrator.objectStore!.presignUploads(ref, [{ name: 'movie.mp4', bytes: 6 * 1024 * 1024 }], 60_000);
      assert.ok(upload && 'multipart' in upload);
      const key = `forged/t1/${job.id}/1/movie.mp4`;
      const pending = async () => ((await reader.send(new ListMultipartUploadsCommand({ Bucket: s3.bucket, Prefix: key }))).Uploads ?? []).length;
      const forged = { op: 'complete_upload', ...ref, name: 'movie.mp4', uploadId: upload.multipart.uploadId, parts: [{ partNumber: 1, etag: '"x"' }] };

      const withoutKey = await forgeControlRequest(outsider, harness.topology, { ...forged, token: job.leaseToken! });
      assert.equal((withoutKey as { code?: string }).code, 'unauthorized', 'even with the real token, no key is no hearing');
      assert.equal(await pending(), 1, 'the upload is untouched');

      const guessedToken = await forgeControlRequest(outsider, harness.topology, { ...forged, token: randomUUID() }, { fleetKey });
      assert.deepEqual(guessedToken, { op: 'complete_upload', jobId: job.id, attempt: 1, live: false, reason: 'superseded' });
      assert.equal(await pending(), 0, 'the refused upload was aborted');
      await assert.rejects(reader.send(new HeadObjectCommand({ Bucket: s3.bucket, Key: key })));

      // Nor does a forged renew get part URLs.
      const [other] = await harness.orchestrator.objectStore!.presignUploads(ref, [{ name: 'clip.mp4', bytes: 6 * 1024 * 1024 }], 60_000);
      assert.ok(other && 'multipart' in other);
      const renew = { op: 'renew_upload', ...ref, name: 'clip.mp4', uploadId: other.multipart.uploadId, parts: [{ partNumber: 1, start: 0, end: 99 }] };
      const renewWithoutKey = await forgeControlRequest(outsider, harness.topology, { ...renew, token: job.leaseToken! });
      assert.equal((renewWithoutKey as { code?: string }).code, 'unauthorized');
      const renewGuessed = await forgeControlRequest(outsider, harness.topology, { ...renew, token: randomUUID() }, { fleetKey });
      assert.deepEqual(renewGuessed, { op: 'renew_upload', jobId: job.id, attempt: 1, live: false, reason: 'superseded' });
      assert.ok(!JSON.stringify([renewWithoutKey, renewGuessed]).includes('X-Amz-Signature'), 'no URL handed out');
      await waitFor('the real worker to finish the job', async () => (await harness.ledger.getJob(job.id))?.state === 'finished');
    });
  });
});
