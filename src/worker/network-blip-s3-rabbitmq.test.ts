/**
 * The network blip (issue 11, first test) with the S3 store: the scenario of
 * test/worker/network-blip.ts (A cut off past its TTL, B takes attempt 2 over and
 * delivers, A's child finishes late), with the orchestrator keeping outputs in an
 * S3-protocol server (s3rver, in this process on a free port), so the fence is the upload
 * permission: a live fence answer carries presigned PUT URLs for that attempt's keys, a
 * refused one carries none.
 *
 * Asserted on what the orchestrator signed (every presignUploads call, recorded) and on
 * every fence answer it gave (its control handler, wrapped): A is never handed an upload
 * URL for attempt 1, not while cut off, not once healed, not when it asks outright after
 * its lease ended; the only URL signed is B's, for attempt 2's key, after B's grant. In the
 * bucket, the job's prefix holds attempt 2's object alone, with B's bytes, never A's; the
 * result and the ledger name that s3:// location; the worker's folder store is untouched.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { describe, it } from 'node:test';
import { GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import type { ControlHandler } from '../orchestrator/control-handler.js';
import type { AttemptRef } from '../orchestrator/object-store.js';
import type { ControlReply, ControlRequest, FenceReply, PresignedUpload } from '../control/protocol.js';
import { startS3Server, testS3Credentials } from '../../test/testing/s3-server.js';
import { networkBlip, variants, type BlipStore } from '../../test/worker/network-blip.js';
import { stubbornOutputFile } from '../../test/worker/fixtures/stubborn-jobs.js';
import type { Variant } from '../../test/worker/network-blip.js';

interface Signed {
  at: number;
  ref: AttemptRef;
  names: string[];
  urls: string[];
}

interface Answered {
  at: number;
  request: ControlRequest;
  reply: ControlReply;
}

async function s3Blip(variant: Variant): Promise<void> {
  const s3 = await startS3Server();
  const store = s3.store('blip');
  // What the orchestrator signed: every presigned upload, with the attempt it was for.
  const signed: Signed[] = [];
  const presignUploads = store.presignUploads.bind(store);
  store.presignUploads = async (ref, outputs, expiresInMs): Promise<PresignedUpload[]> => {
    const uploads = await presignUploads(ref, outputs, expiresInMs);
    signed.push({
      at: Date.now(),
      ref: { ...ref },
      names: outputs.map((o) => o.name),
      urls: uploads.flatMap((u) => ('url' in u ? [u.url] : u.multipart.parts.map((part) => part.url))),
    });
    return uploads;
  };
  // Every fence answer the orchestrator gave, as it went out.
  const answered: Answered[] = [];
  const reader = new S3Client({ endpoint: s3.endpoint, forcePathStyle: true, region: 'us-east-1', credentials: testS3Credentials });
  const keyOf = (jobId: string, attempt: number) => store.keyOf({ tenant: 'acme', jobId, attempt }, stubbornOutputFile);
  const s3Store: BlipStore = {
    harness: { objectStore: store },
    locationOf: (_harness, jobId, attempt) => store.locationOf(keyOf(jobId, attempt)),
    // A fence asking for upload URLs outright gets none either.
    staleFenceExtra: (witnessA) => ({ outputs: [{ name: stubbornOutputFile, bytes: witnessA.output.length }] }),
    started: (harness) => {
      const control = (harness.orchestrator as unknown as { control: ControlHandler }).control;
      const handle = control.handle.bind(control);
      control.handle = async (raw) => {
        const reply = await handle(raw);
        const request = raw as ControlRequest;
        if (request.op === 'fence') answered.push({ at: Date.now(), request, reply: reply as ControlReply });
        return reply;
      };
    },
    check: async ({ harness, job, bGranted, witnessA, witnessB }) => {
      const attempt2Location = store.locationOf(keyOf(job.id, 2));
      assert.equal(attempt2Location, `s3://${s3.bucket}/blip/acme/${job.id}/2/${stubbornOutputFile}`);
      // What the orchestrator signed: one upload, for attempt 2's key, after B's grant; never
      // anything for attempt 1 (A never had a live fence, before or after its lease ended).
      assert.deepEqual(
        signed.map((s) => [s.ref.attempt, s.names]),
        [[2, [stubbornOutputFile]]],
        'the only upload URL signed is B’s',
      );
      assert.ok(signed[0]!.at >= bGranted.at, 'signed after B was granted attempt 2');
      assert.match(new URL(signed[0]!.urls[0]!).pathname, new RegExp(`/2/${stubbornOutputFile.replace('.', '\\.')}$`));
      // Every fence answer: those for attempt 1 refused, with no URL; only attempt 2's carry one.
      const fences = answered.map((a) => ({ request: a.request as Extract<ControlRequest, { op: 'fence' }>, reply: a.reply as FenceReply }));
      assert.ok(
        fences.some((f) => f.request.attempt === 1),
        'A’s outright fence was answered',
      );
      for (const { reply } of fences.filter((f) => f.request.attempt === 1)) {
        assert.equal(reply.live, false, `a fence of attempt 1 answered ${JSON.stringify(reply)}`);
        assert.equal('uploads' in reply, false, 'no upload URL for attempt 1');
      }
      assert.deepEqual(
        fences.filter((f) => f.reply.live && f.reply.uploads).map((f) => [f.request.attempt, f.reply.live && f.reply.uploads?.map((u) => u.location)]),
        [[2, [attempt2Location]]],
      );

      // Nothing of A's in the bucket: the job's prefix holds attempt 2's object alone, with B's bytes.
      const listed = await reader.send(new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: `blip/acme/${job.id}/` }));
      assert.deepEqual(
        (listed.Contents ?? []).map((o) => o.Key),
        [keyOf(job.id, 2)],
      );
      const object = await reader.send(new GetObjectCommand({ Bucket: s3.bucket, Key: keyOf(job.id, 2) }));
      const bytes = Buffer.from(await object.Body!.transformToByteArray());
      assert.deepEqual(bytes, Buffer.from(witnessB.output), "the stored bytes are B's");
      assert.notDeepEqual(bytes, Buffer.from(witnessA.output));
      assert.equal(existsSync(harness.outputRoot), false, 'nothing in a folder store');
    },
    close: async () => {
      reader.destroy();
      await s3.stop();
    },
  };
  await networkBlip(variant, s3Store);
}

describe('a network blip with the S3 store: A is cut off, B runs attempt 2 and uploads, A finishes late (RabbitMQ)', () => {
  for (const [variant, title] of variants) it(title, () => s3Blip(variant));
});
