/**
 * A worker whose multipart upload the orchestrator refuses to complete gives the attempt
 * up exactly as after a refused fence: the job is cancelled by its tenant after the fence
 * said yes and before the complete (no heartbeat or progress tells the worker in between),
 * so the parts go up, `complete_upload` is answered not live, the orchestrator aborts the
 * upload, and the worker emits `fenced_out` and settles nothing. Embedded broker, s3rver.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { HeadObjectCommand, ListMultipartUploadsCommand, S3Client } from '@aws-sdk/client-s3';
import { EmbeddedBroker } from '../broker/embedded.js';
import { Harness, type TestWorker } from '../../test/testing/harness.js';
import { startS3Server, testS3Credentials, type TestS3Server } from '../../test/testing/s3-server.js';
import { waitFor } from '../../test/testing/wait.js';
import { bigOutputFile } from '../../test/worker/fixtures/big-output-jobs.js';

const MiB = 1024 * 1024;
const bigOutputJobsModule = new URL('../../test/worker/fixtures/big-output-jobs.js', import.meta.url).pathname;

describe('a multipart upload refused at its complete', () => {
  const broker = new EmbeddedBroker();
  let s3: TestS3Server;
  let reader: S3Client;
  let harness: Harness;
  let worker: TestWorker;

  before(async () => {
    s3 = await startS3Server();
    reader = new S3Client({ endpoint: s3.endpoint, forcePathStyle: true, region: 'us-east-1', credentials: testS3Credentials });
    const store = s3.store('refused', { partSize: 5 * MiB });
    harness = await new Harness({ broker: broker.connect(), objectStore: store, ledgerConfig: { leaseTtlMs: 60_000 } }).start();
    // The tenant cancels the job right after its fence said yes, before any part goes up.
    const presignUploads = store.presignUploads.bind(store);
    store.presignUploads = async (ref, outputs, expiresInMs) => {
      const uploads = await presignUploads(ref, outputs, expiresInMs);
      await harness.orchestrator.cancel(ref.jobId, ref.tenant);
      return uploads;
    };
    // Heartbeats far apart: the worker hears of the cancel only from the complete's answer.
    worker = await harness.startWorker(broker.connect(), { slots: 1, jobModules: [bigOutputJobsModule], timing: { heartbeatIntervalMs: 30_000 } });
  });
  after(async () => {
    await harness.close();
    reader.destroy();
    await s3.stop();
    await broker.close();
  });

  it('the worker gives the attempt up as after a refused fence, and nothing of the upload is left or visible', async () => {
    // 6 MiB: two parts, and under the size whose upload is reported as progress.
    const { job } = await harness.orchestrator.submit({ tenant: 'acme', type: 'big-output', input: { bytes: 6 * MiB } });
    await waitFor('the worker to be done with the job', () => worker.events.some((e) => e.type === 'job_done' && e.jobId === job.id), 20_000);
    const events = worker.events.filter((e) => 'jobId' in e && e.jobId === job.id).map((e) => e.type);
    assert.ok(events.includes('fenced_out'), JSON.stringify(events));
    const fencedOut = worker.events.find((e) => e.type === 'fenced_out' && e.jobId === job.id);
    assert.equal((fencedOut as { reason?: string }).reason, 'cancelled');
    assert.ok(!events.includes('output_stored') && !events.includes('settled') && !events.includes('settle_refused'), JSON.stringify(events));
    const key = `refused/acme/${job.id}/1/${bigOutputFile}`;
    const pending = await reader.send(new ListMultipartUploadsCommand({ Bucket: s3.bucket, Prefix: key }));
    assert.deepEqual(pending.Uploads ?? [], [], 'the orchestrator aborted the upload');
    await assert.rejects(reader.send(new HeadObjectCommand({ Bucket: s3.bucket, Key: key })));
    const ended = await harness.ledger.getJob(job.id);
    assert.equal(ended?.result ?? null, null, 'no result names the output');
  });
});
