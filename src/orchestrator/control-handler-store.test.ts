/**
 * The fence is the upload permission: with an object store, a live fence answer carries a
 * presigned PUT URL per output the worker named, for that attempt's keys, expiring shortly
 * after the lease's deadline; a refused fence carries nothing. Asserted on the answers the
 * orchestrator's control handler gives, against an s3rver this test starts.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startS3Server, type TestS3Server } from '../../test/testing/s3-server.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { ManualClock } from '../core/clock.js';
import type { Ledger } from '../ledger/ledger.js';
import { openSqliteLedger } from '../ledger/sqlite/sqlite-ledger.js';
import { ControlHandler } from './control-handler.js';
import { Fleet } from './fleet.js';

const secret = 'secret-of-worker-process-w1-0123';
const ttlMs = 20_000;
const graceMs = 5_000;

describe('the fence with an object store', () => {
  const dir = tempDir();
  const clock = new ManualClock(Date.now());
  let ledger: Ledger;
  let handler: ControlHandler;
  let s3: TestS3Server;

  before(async () => {
    s3 = await startS3Server();
    ledger = await openSqliteLedger({ path: join(dir.path, 'ledger.db'), clock, config: { leaseTtlMs: ttlMs } });
    handler = new ControlHandler(ledger, new Fleet(clock, 60_000), { leaseTtlMs: ttlMs }, undefined, { store: s3.store('p'), graceMs, now: () => clock.now() });
  });
  after(async () => {
    await ledger.close();
    await s3.stop();
    dir.remove();
  });

  async function leased(): Promise<{ jobId: string; attempt: number; token: string; tenant: string }> {
    const { job } = await ledger.submit({ tenant: 'acme', type: 'probe', input: {} });
    const lease = await handler.handle({ op: 'lease', jobId: job.id, attempt: 1, tenant: 'acme', worker: 'w1', secret });
    assert.ok(lease.op === 'lease' && lease.granted);
    assert.equal(lease.store, 'presigned', 'the grant tells the worker that outputs go where the fence says');
    return { jobId: job.id, attempt: 1, token: lease.token, tenant: 'acme' };
  }

  it('a live fence answer carries one URL per named output, for this attempt’s keys, valid until the deadline plus the grace', async () => {
    const ref = await leased();
    const reply = await handler.handle({
      op: 'fence',
      ...ref,
      outputs: [
        { name: 'a.mp4', bytes: 10 },
        { name: 'thumbs/1.jpg', bytes: 3 },
      ],
    });
    assert.ok(reply.op === 'fence' && reply.live && reply.uploads);
    assert.deepEqual(
      reply.uploads.map((u) => [u.name, u.location]),
      [
        ['a.mp4', `s3://${s3.bucket}/p/acme/${ref.jobId}/1/a.mp4`],
        ['thumbs/1.jpg', `s3://${s3.bucket}/p/acme/${ref.jobId}/1/thumbs/1.jpg`],
      ],
    );
    for (const upload of reply.uploads) {
      assert.ok('url' in upload, 'a file of at most the part size is one PUT');
      const url = new URL(upload.url);
      assert.equal(url.searchParams.get('X-Amz-Expires'), String((ttlMs + graceMs) / 1000));
      assert.match(url.searchParams.get('X-Amz-SignedHeaders') ?? '', /content-length/);
      assert.equal(url.searchParams.get('X-Amz-Credential')?.startsWith('S3RVER/'), true, 'signed with the orchestrator’s credential');
    }
  });

  it('a fence without outputs (a worker of an earlier version) is answered as before', async () => {
    const ref = await leased();
    assert.deepEqual(await handler.handle({ op: 'fence', ...ref }), { op: 'fence', jobId: ref.jobId, attempt: 1, live: true, ttlMs });
  });

  it('a refused fence hands out no URL: lease expired, superseded, wrong token, wrong tenant', async () => {
    const outputs = [{ name: 'a.mp4', bytes: 10 }];
    const ref = await leased();
    for (const wrong of [
      { ...ref, token: 'not-the-token' },
      { ...ref, tenant: 'other' },
    ]) {
      const reply = await handler.handle({ op: 'fence', ...wrong, outputs });
      assert.equal(reply.op === 'fence' && reply.live, false);
      assert.equal('uploads' in reply, false);
    }
    clock.advance(ttlMs + 1);
    const expired = await handler.handle({ op: 'fence', ...ref, outputs });
    assert.deepEqual(expired, { op: 'fence', jobId: ref.jobId, attempt: 1, live: false, reason: 'expired' });
  });

  it('an output name that could leave the attempt’s prefix is refused as invalid_output, and no URL is signed', async () => {
    for (const name of ['../other/1/a.mp4', '/etc/passwd', 'a/../../b', '']) {
      const ref = await leased();
      const reply = await handler.handle({
        op: 'fence',
        ...ref,
        outputs: [
          { name: 'ok.txt', bytes: 1 },
          { name, bytes: 1 },
        ],
      });
      assert.ok(reply.op === 'fence' && reply.live);
      assert.match(reply.invalidOutput ?? '', /output/);
      assert.equal(reply.uploads, undefined);
    }
  });

  describe('inputs: presigned GETs of a live lease’s s3:// inputs', () => {
    it("are signed for the job's own tenant's keys only, valid until the deadline plus the grace, and the store serves them", async () => {
      const ref = await leased();
      const store = s3.store('p');
      const key = store.uploadKeyOf('acme', 'u1', 'clip.mp4');
      const put = await fetch(await store.presignUpload(key, 5, 60_000), { method: 'PUT', body: 'bytes' });
      assert.equal(put.status, 200);
      const ownOutput = `s3://${s3.bucket}/p/acme/some-job/1/a.mp4`;
      const reply = await handler.handle({ op: 'inputs', ...ref, locations: [store.locationOf(key), ownOutput] });
      assert.ok(reply.op === 'inputs' && reply.live && reply.downloads, JSON.stringify(reply));
      assert.deepEqual(
        reply.downloads.map((d) => d.location),
        [store.locationOf(key), ownOutput],
      );
      const url = new URL(reply.downloads[0]!.url);
      assert.equal(url.searchParams.get('X-Amz-Expires'), String((ttlMs + graceMs) / 1000));
      assert.equal(await (await fetch(url)).text(), 'bytes');
    });

    it("refuses, naming it, any location outside the tenant's keys: another tenant's, another bucket, another prefix, a . or .. segment", async () => {
      const ref = await leased();
      for (const location of [
        `s3://${s3.bucket}/p/other/uploads/u1/clip.mp4`,
        `s3://another-bucket/p/acme/uploads/u1/clip.mp4`,
        `s3://${s3.bucket}/q/acme/uploads/u1/clip.mp4`,
        `s3://${s3.bucket}/p/acme/../other/uploads/u1/clip.mp4`,
        `s3://${s3.bucket}/p/acme/./uploads/u1/clip.mp4`,
        `s3://${s3.bucket}/p/acme/`,
        `s3://${s3.bucket}/p/acmecorp/uploads/u1/clip.mp4`,
      ]) {
        const reply = await handler.handle({ op: 'inputs', ...ref, locations: [`s3://${s3.bucket}/p/acme/uploads/u1/ok.mp4`, location] });
        assert.ok(reply.op === 'inputs' && reply.live, JSON.stringify(reply));
        assert.ok(reply.refused?.includes(location), `${location}: ${JSON.stringify(reply)}`);
        assert.equal(reply.downloads, undefined, 'no URL at all, not even for the acceptable location');
      }
    });

    it('a lease that is not live gets nothing: wrong token, wrong tenant, expired', async () => {
      const ref = await leased();
      const locations = [`s3://${s3.bucket}/p/acme/uploads/u1/clip.mp4`];
      for (const wrong of [
        { ...ref, token: 'not-the-token' },
        { ...ref, tenant: 'other' },
      ]) {
        const reply = await handler.handle({ op: 'inputs', ...wrong, locations });
        assert.equal(reply.op === 'inputs' && reply.live, false);
        assert.equal('downloads' in reply, false);
      }
      clock.advance(ttlMs + 1);
      assert.deepEqual(await handler.handle({ op: 'inputs', ...ref, locations }), {
        op: 'inputs',
        jobId: ref.jobId,
        attempt: 1,
        live: false,
        reason: 'expired',
      });
    });

    it('an orchestrator without an object store refuses an s3:// input, naming it', async () => {
      const storeless = new ControlHandler(ledger, new Fleet(clock, 60_000), { leaseTtlMs: ttlMs });
      const { job } = await ledger.submit({ tenant: 'acme', type: 'probe', input: {} });
      const lease = await storeless.handle({ op: 'lease', jobId: job.id, attempt: 1, tenant: 'acme', worker: 'w1', secret });
      assert.ok(lease.op === 'lease' && lease.granted);
      const location = `s3://${s3.bucket}/p/acme/uploads/u1/clip.mp4`;
      const reply = await storeless.handle({ op: 'inputs', jobId: job.id, attempt: 1, token: lease.token, tenant: 'acme', locations: [location] });
      assert.ok(reply.op === 'inputs' && reply.live);
      assert.match(reply.refused ?? '', /has no object store/);
      assert.ok(reply.refused?.includes(location));
    });
  });
});
