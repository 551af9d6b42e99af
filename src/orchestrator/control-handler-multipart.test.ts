/**
 * Multipart uploads through the fence, against an s3rver this test starts: an output over
 * the store's part size gets a multipart upload with a presigned URL per part; the worker's
 * store streams the parts and hands the ETags back with `complete_upload`, which the
 * orchestrator completes only while the lease is live, and otherwise aborts. And a URL
 * used after its lease's deadline (plus the grace) is refused by the store itself.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { GetObjectCommand, HeadObjectCommand, ListMultipartUploadsCommand, S3Client } from '@aws-sdk/client-s3';
import { startS3Server, testS3Credentials, type TestS3Server } from '../../test/testing/s3-server.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import type { CompleteUploadReply, PresignedUpload, RenewUploadReply } from '../control/protocol.js';
import { ManualClock } from '../core/clock.js';
import type { Ledger } from '../ledger/ledger.js';
import { openSqliteLedger } from '../ledger/sqlite/sqlite-ledger.js';
import { PresignedOutputStore, UploadFencedOutError } from '../worker/output-store.js';
import type { MultipartControl } from '../worker/presigned-upload.js';
import { ControlHandler } from './control-handler.js';
import { Fleet } from './fleet.js';
import type { S3OutputStore } from './object-store.js';

const secret = 'secret-of-worker-process-w1-0123';
const ttlMs = 20_000;
const graceMs = 5_000;
const MiB = 1024 * 1024;
const partSize = 5 * MiB;

type Lease = { jobId: string; attempt: number; token: string; tenant: string };

describe('multipart uploads through the fence', () => {
  const dir = tempDir();
  const clock = new ManualClock(Date.now());
  let ledger: Ledger;
  let store: S3OutputStore;
  let handler: ControlHandler;
  let s3: TestS3Server;
  let reader: S3Client;

  before(async () => {
    s3 = await startS3Server();
    store = s3.store('mp', { partSize });
    ledger = await openSqliteLedger({ path: join(dir.path, 'ledger.db'), clock, config: { leaseTtlMs: ttlMs } });
    handler = new ControlHandler(ledger, new Fleet(clock, 60_000), { leaseTtlMs: ttlMs }, undefined, { store, graceMs, now: () => clock.now() });
    reader = new S3Client({ endpoint: s3.endpoint, forcePathStyle: true, region: 'us-east-1', credentials: testS3Credentials });
  });
  after(async () => {
    reader.destroy();
    await ledger.close();
    await s3.stop();
    dir.remove();
  });

  async function leased(): Promise<Lease> {
    const { job } = await ledger.submit({ tenant: 'acme', type: 'probe', input: {} });
    const lease = await handler.handle({ op: 'lease', jobId: job.id, attempt: 1, tenant: 'acme', worker: 'w1', secret });
    assert.ok(lease.op === 'lease' && lease.granted);
    return { jobId: job.id, attempt: 1, token: lease.token, tenant: 'acme' };
  }

  /** A scratch folder holding one file of `bytes` bytes, each byte different from its neighbours. */
  function scratchWith(name: string, bytes: number): { scratch: string; content: Buffer } {
    const scratch = join(dir.path, `scratch-${Math.random()}`);
    mkdirSync(scratch);
    const content = Buffer.from(Array.from({ length: bytes }, (_, i) => (i * 13 + (i >> 10)) & 0xff));
    writeFileSync(join(scratch, name), content);
    return { scratch, content };
  }

  async function fence(lease: Lease, outputs: Array<{ name: string; bytes: number }>): Promise<PresignedUpload[]> {
    const reply = await handler.handle({ op: 'fence', ...lease, outputs });
    assert.ok(reply.op === 'fence' && reply.live && reply.uploads, JSON.stringify(reply));
    return reply.uploads;
  }

  /** The worker's side of complete_upload and renew_upload, straight to the handler; `before` runs ahead of each request. */
  function control(lease: Lease, before: (op: string) => void = () => undefined): MultipartControl {
    return {
      complete: async (name, uploadId, parts) => {
        before('complete_upload');
        return (await handler.handle({ op: 'complete_upload', ...lease, name, uploadId, parts })) as CompleteUploadReply;
      },
      renew: async (name, uploadId, parts) => {
        before('renew_upload');
        return (await handler.handle({ op: 'renew_upload', ...lease, name, uploadId, parts })) as RenewUploadReply;
      },
    };
  }

  function workerStore(lease: Lease, uploads: PresignedUpload[], progress: Array<[number, number]> = []): PresignedOutputStore {
    return new PresignedOutputStore(uploads, undefined, { multipart: control(lease), onProgress: (sent, total) => progress.push([sent, total]) });
  }

  /** The multipart uploads of a job's attempt 1 still in progress (neither completed nor aborted). */
  async function pendingUploads(lease: Lease): Promise<string[]> {
    const listed = await reader.send(new ListMultipartUploadsCommand({ Bucket: s3.bucket, Prefix: `mp/acme/${lease.jobId}/1/` }));
    return (listed.Uploads ?? []).map((upload) => upload.Key!);
  }

  async function exists(key: string): Promise<boolean> {
    try {
      await reader.send(new HeadObjectCommand({ Bucket: s3.bucket, Key: key }));
      return true;
    } catch {
      return false;
    }
  }

  it('an output over the part size gets a URL per part, each for its byte range, expiring with the lease', async () => {
    const lease = await leased();
    const bytes = 2 * partSize + 123;
    const [small, big] = await fence(lease, [
      { name: 'small.txt', bytes: partSize },
      { name: 'big.bin', bytes },
    ]);
    assert.ok(small && 'url' in small, 'a file of exactly the part size is one PUT');
    assert.ok(big && 'multipart' in big);
    assert.equal(big.location, `s3://${s3.bucket}/mp/acme/${lease.jobId}/1/big.bin`);
    assert.deepEqual(
      big.multipart.parts.map(({ partNumber, start, end }) => [partNumber, start, end]),
      [
        [1, 0, partSize - 1],
        [2, partSize, 2 * partSize - 1],
        [3, 2 * partSize, bytes - 1],
      ],
    );
    for (const part of big.multipart.parts) {
      const url = new URL(part.url);
      assert.equal(url.searchParams.get('partNumber'), String(part.partNumber));
      assert.equal(url.searchParams.get('uploadId'), big.multipart.uploadId);
      assert.equal(url.searchParams.get('X-Amz-Expires'), String((ttlMs + graceMs) / 1000));
      assert.match(url.searchParams.get('X-Amz-SignedHeaders') ?? '', /content-length/);
    }
    assert.deepEqual(await pendingUploads(lease), [`mp/acme/${lease.jobId}/1/big.bin`], 'the orchestrator created the upload');
  });

  it('the worker streams the parts and the orchestrator completes them: the object’s bytes and sha256 are the file’s', async () => {
    const lease = await leased();
    const bytes = 2 * partSize + 4321;
    const { scratch, content } = scratchWith('big.bin', bytes);
    const uploads = await fence(lease, [{ name: 'big.bin', bytes }]);
    const progress: Array<[number, number]> = [];
    const worker = workerStore(lease, uploads, progress);
    const stored = await worker.put(lease, scratch, ['big.bin']);

    const key = `mp/acme/${lease.jobId}/1/big.bin`;
    const sha256 = createHash('sha256').update(content).digest('hex');
    assert.deepEqual(stored, { 'big.bin': { location: `s3://${s3.bucket}/${key}`, bytes, sha256 } });
    const object = await reader.send(new GetObjectCommand({ Bucket: s3.bucket, Key: key }));
    const got = Buffer.from(await object.Body!.transformToByteArray());
    assert.equal(got.length, bytes);
    assert.ok(got.equals(content), 'the parts were assembled in order');
    assert.deepEqual(await pendingUploads(lease), [], 'no upload is left pending');
    assert.deepEqual(progress.at(-1), [bytes, bytes]);
    assert.ok(
      progress.every(([sent], i) => i === 0 || sent > progress[i - 1]![0]),
      'progress only grows',
    );
  });

  it('a complete after the lease expired is refused, and the upload is aborted: nothing becomes visible', async () => {
    const lease = await leased();
    const bytes = partSize + 10;
    const { scratch } = scratchWith('late.bin', bytes);
    const uploads = await fence(lease, [{ name: 'late.bin', bytes }]);
    const complete = workerStore(lease, uploads);
    // The parts go up while the lease is live; the lease runs out before the complete.
    const store = new PresignedOutputStore(uploads, undefined, { multipart: control(lease, () => clock.advance(ttlMs + 1)) });
    await assert.rejects(store.put(lease, scratch, ['late.bin']), (error: unknown) => error instanceof UploadFencedOutError && error.reason === 'expired');
    assert.equal(await exists(`mp/acme/${lease.jobId}/1/late.bin`), false);
    assert.deepEqual(await pendingUploads(lease), [], 'the orchestrator aborted the upload');
    // Nor can the same upload be completed afterwards: it is gone.
    await assert.rejects(complete.put(lease, scratch, ['late.bin']), /NoSuchUpload/);
  });

  it('a forged complete (a guessed token, another tenant) is refused and completes nothing', async () => {
    const lease = await leased();
    const bytes = partSize + 10;
    const { scratch } = scratchWith('f.bin', bytes);
    const [upload] = await fence(lease, [{ name: 'f.bin', bytes }]);
    assert.ok(upload && 'multipart' in upload);
    const parts = [{ partNumber: 1, etag: '"0"' }];
    const otherTenant = await handler.handle({ op: 'complete_upload', ...lease, tenant: 'other', name: 'f.bin', uploadId: upload.multipart.uploadId, parts });
    assert.deepEqual(otherTenant, { op: 'complete_upload', jobId: lease.jobId, attempt: 1, live: false, reason: 'unknown_job' });
    assert.deepEqual(await pendingUploads(lease), [`mp/acme/${lease.jobId}/1/f.bin`], 'another tenant cannot abort it either');
    const guessed = await handler.handle({
      op: 'complete_upload',
      ...lease,
      token: 'not-the-token',
      name: 'f.bin',
      uploadId: upload.multipart.uploadId,
      parts,
    });
    assert.deepEqual(guessed, { op: 'complete_upload', jobId: lease.jobId, attempt: 1, live: false, reason: 'superseded' });
    assert.equal(await exists(`mp/acme/${lease.jobId}/1/f.bin`), false);
    assert.deepEqual(await pendingUploads(lease), []);
    // The real holder's upload is gone with it: its parts are refused, nothing is visible.
    await assert.rejects(workerStore(lease, [upload]).put(lease, scratch, ['f.bin']), /NoSuchUpload/);
    const badName = await handler.handle({ op: 'complete_upload', ...lease, name: '../x/1/f.bin', uploadId: upload.multipart.uploadId, parts });
    assert.equal(badName.op, 'error');
  });

  it('an upload that outlasts half its URLs’ life gets fresh URLs for the parts still to go, while the lease is live', async () => {
    const lease = await leased();
    const bytes = 3 * partSize;
    const { scratch, content } = scratchWith('long.bin', bytes);
    const [upload] = await fence(lease, [{ name: 'long.bin', bytes }]);
    assert.ok(upload && 'multipart' in upload);
    assert.equal(upload.multipart.validForMs, ttlMs + graceMs);
    // The worker's clock moves on by most of the URLs' life with each part.
    let workerNow = 0;
    const asked: string[] = [];
    const renewed: RenewUploadReply[] = [];
    // And the orchestrator's by 5 s before each request: fresh URLs expire with the lease as it is then.
    const renewing = control(lease, (op) => {
      asked.push(op);
      clock.advance(5000);
    });
    const store = new PresignedOutputStore([upload], undefined, {
      multipart: {
        complete: renewing.complete,
        renew: async (...args) => {
          const reply = await renewing.renew(...args);
          renewed.push(reply);
          return reply;
        },
      },
      onProgress: (sent) => (workerNow = Math.floor(sent / partSize) * 0.6 * (ttlMs + graceMs)),
      now: () => workerNow,
    });
    await store.put(lease, scratch, ['long.bin']);
    assert.deepEqual(asked, ['renew_upload', 'renew_upload', 'complete_upload'], 'parts 2 and 3 each started on fresh URLs');
    const [first, second] = renewed;
    assert.ok(first?.live && second?.live);
    assert.deepEqual(
      first.parts.map((part) => [part.partNumber, part.start, part.end]),
      [
        [2, partSize, 2 * partSize - 1],
        [3, 2 * partSize, 3 * partSize - 1],
      ],
    );
    assert.equal(first.validForMs, ttlMs + graceMs - 5000);
    assert.equal(new URL(first.parts[0]!.url).searchParams.get('X-Amz-Expires'), String((ttlMs + graceMs - 5000) / 1000));
    assert.equal(second.parts.length, 1);
    assert.equal(new URL(second.parts[0]!.url).searchParams.get('X-Amz-Expires'), String((ttlMs + graceMs - 10_000) / 1000));
    const object = await reader.send(new GetObjectCommand({ Bucket: s3.bucket, Key: `mp/acme/${lease.jobId}/1/long.bin` }));
    assert.ok(Buffer.from(await object.Body!.transformToByteArray()).equals(content));
  });

  it('a renew after the lease expired gives no URL and aborts the upload; the worker gives up as after a refused fence', async () => {
    const lease = await leased();
    const bytes = 2 * partSize;
    const { scratch } = scratchWith('renew.bin', bytes);
    const uploads = await fence(lease, [{ name: 'renew.bin', bytes }]);
    let workerNow = 0;
    const store = new PresignedOutputStore(uploads, undefined, {
      multipart: control(lease, (op) => op === 'renew_upload' && clock.advance(ttlMs + 1)),
      onProgress: () => (workerNow = ttlMs),
      now: () => workerNow,
    });
    await assert.rejects(store.put(lease, scratch, ['renew.bin']), (error: unknown) => error instanceof UploadFencedOutError && error.reason === 'expired');
    assert.deepEqual(await pendingUploads(lease), [], 'the orchestrator aborted the upload');
    assert.equal(await exists(`mp/acme/${lease.jobId}/1/renew.bin`), false);
  });

  it('a URL used after its lease’s deadline plus the grace is refused by the store (HTTP 403), a part URL as well as a PUT', async () => {
    const graceless = new ControlHandler(ledger, new Fleet(clock, 60_000), { leaseTtlMs: ttlMs }, undefined, { store, graceMs: 0, now: () => clock.now() });
    const { job } = await ledger.submit({ tenant: 'acme', type: 'probe', input: {} });
    const granted = await graceless.handle({ op: 'lease', jobId: job.id, attempt: 1, tenant: 'acme', worker: 'w1', secret });
    assert.ok(granted.op === 'lease' && granted.granted);
    // One second of the lease is left when the fence is asked: the URLs live that long.
    clock.advance(ttlMs - 1000);
    const reply = await graceless.handle({
      op: 'fence',
      jobId: job.id,
      attempt: 1,
      token: granted.token,
      tenant: 'acme',
      outputs: [
        { name: 'a.txt', bytes: 3 },
        { name: 'b.bin', bytes: partSize + 1 },
      ],
    });
    assert.ok(reply.op === 'fence' && reply.live && reply.uploads);
    const [whole, multipart] = reply.uploads;
    assert.ok(whole && 'url' in whole && multipart && 'multipart' in multipart);
    const urls = [whole.url, multipart.multipart.parts[0]!.url];
    for (const url of urls) assert.equal(new URL(url).searchParams.get('X-Amz-Expires'), '1');
    // Past every URL's own expiry, by the store's (real) clock: each was signed at its X-Amz-Date (the part's after the upload was created).
    const signedAt = Math.max(
      ...urls.map((url) =>
        Date.parse(new URL(url).searchParams.get('X-Amz-Date')!.replace(/(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z/, '$1-$2-$3T$4:$5:$6Z')),
      ),
    );
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, signedAt + 1000 - Date.now()) + 50));
    const refused = await fetch(urls[0]!, { method: 'PUT', body: 'abc', headers: { 'content-length': '3' } });
    assert.equal(refused.status, 403);
    assert.match(await refused.text(), /Request has expired/);
    const part = await fetch(urls[1]!, { method: 'PUT', body: Buffer.alloc(partSize), headers: { 'content-length': String(partSize) } });
    assert.equal(part.status, 403);
    await part.body?.cancel();
    assert.equal(await exists(`mp/acme/${job.id}/1/a.txt`), false);
  });
});
