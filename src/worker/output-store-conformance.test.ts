/**
 * One conformance suite for the output stores behind the OutputStore seam: the folder
 * store (`DirectoryOutputStore`) and the S3 store as a worker uses it (presigned PUT URLs
 * the orchestrator signed with a live fence, `PresignedOutputStore`), against an
 * S3-protocol server (s3rver) this test starts on a free port in a temp folder.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { freePort } from '../../test/testing/free-port.js';
import { startS3Server, testS3Credentials, type TestS3Server } from '../../test/testing/s3-server.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { S3OutputStore } from '../orchestrator/object-store.js';
import { outputNameProblem, parseStoreUrl } from '../orchestrator/store-names.js';
import { DirectoryOutputStore, PresignedOutputStore, StorageError, type AttemptKey, type OutputStore } from './output-store.js';

interface StoreUnderTest {
  /** The store a worker would use for this attempt (for S3: after a live fence signed its URLs). */
  forAttempt(key: AttemptKey, scratchDir: string, files: readonly string[]): Promise<OutputStore>;
  read(location: string): Promise<Buffer>;
}

const dir = tempDir('planrun-store-');
let s3: TestS3Server;
let reader: S3Client;

before(async () => {
  s3 = await startS3Server();
  reader = new S3Client({ endpoint: s3.endpoint, forcePathStyle: true, region: 'us-east-1', credentials: testS3Credentials });
});
after(async () => {
  reader.destroy();
  await s3.stop();
  dir.remove();
});

const stores: Array<[string, () => StoreUnderTest]> = [
  [
    'the folder store',
    () => {
      const store = new DirectoryOutputStore(join(dir.path, 'outputs'));
      return { forAttempt: async () => store, read: async (location) => readFileSync(new URL(location)) };
    },
  ],
  [
    'the S3 store (presigned URLs from the fence)',
    () => {
      const store = s3.store('conformance');
      return {
        forAttempt: async (key, scratchDir, files) => {
          const outputs = files.map((name) => ({ name, bytes: readFileSync(join(scratchDir, name)).length }));
          return new PresignedOutputStore(await store.presignUploads(key, outputs, 60_000));
        },
        read: async (location) => {
          const key = store.keyOfLocation(location);
          assert.ok(key, `${location} is in the store`);
          const object = await reader.send(new GetObjectCommand({ Bucket: s3.bucket, Key: key }));
          return Buffer.from(await object.Body!.transformToByteArray());
        },
      };
    },
  ],
];

function scratchWith(name: string, files: Record<string, string | Buffer>): string {
  const scratch = join(dir.path, 'scratch', name);
  for (const [file, content] of Object.entries(files)) {
    mkdirSync(join(scratch, file, '..'), { recursive: true });
    writeFileSync(join(scratch, file), content);
  }
  return scratch;
}

for (const [label, make] of stores) {
  describe(`OutputStore conformance: ${label}`, () => {
    it('stores each named file, subfolders included, and names { location, bytes, sha256 } of the bytes each location reads back', async () => {
      const store = make();
      const big = Buffer.alloc(3 * 1024 * 1024 + 17, 7);
      const files = { 'a.txt': 'alpha\n', 'sub/b.bin': big, 'empty.txt': '' };
      const scratch = scratchWith(`${label}-1`, files);
      const key = { tenant: 'acme', jobId: `job-${label.length}`, attempt: 1 };
      const names = Object.keys(files);
      const stored = await (await store.forAttempt(key, scratch, names)).put(key, scratch, names);
      assert.deepEqual(Object.keys(stored).sort(), [...names].sort());
      for (const [name, content] of Object.entries(files)) {
        const entry = stored[name]!;
        assert.deepEqual(Object.keys(entry).sort(), ['bytes', 'location', 'sha256']);
        assert.match(entry.location, /^(file|s3):\/\//);
        const read = await store.read(entry.location);
        assert.deepEqual(read, Buffer.from(content));
        assert.equal(entry.bytes, read.length);
        assert.equal(entry.sha256, createHash('sha256').update(read).digest('hex'));
      }
    });

    it('locations are scoped to (tenant, job, attempt): a later attempt never overwrites an earlier one', async () => {
      const store = make();
      const first = { tenant: 'acme', jobId: 'job-scoped', attempt: 1 };
      const second = { ...first, attempt: 2 };
      const scratch1 = scratchWith(`${label}-s1`, { 'out.txt': 'first' });
      const scratch2 = scratchWith(`${label}-s2`, { 'out.txt': 'second' });
      const a = await (await store.forAttempt(first, scratch1, ['out.txt'])).put(first, scratch1, ['out.txt']);
      const b = await (await store.forAttempt(second, scratch2, ['out.txt'])).put(second, scratch2, ['out.txt']);
      assert.notEqual(a['out.txt']!.location, b['out.txt']!.location);
      assert.match(a['out.txt']!.location, /acme\/job-scoped\/1\/out\.txt$/);
      assert.equal((await store.read(a['out.txt']!.location)).toString(), 'first');
      assert.equal((await store.read(b['out.txt']!.location)).toString(), 'second');
      assert.notEqual(a['out.txt']!.sha256, b['out.txt']!.sha256);
    });
  });
}

describe('the folder store', () => {
  it('names a file:// URL under <root>/<tenant>/<job>/<attempt>/, and never replaces a stored file (the same attempt storing twice fails, the first bytes stay)', async () => {
    const root = join(dir.path, 'no-overwrite');
    const store = new DirectoryOutputStore(root);
    const key = { tenant: 'acme', jobId: 'j-once', attempt: 1 };
    const first = await store.put(key, scratchWith('once-1', { 'o.txt': 'first' }), ['o.txt']);
    assert.deepEqual(first['o.txt'], {
      location: pathToFileURL(join(root, 'acme', 'j-once', '1', 'o.txt')).href,
      bytes: 5,
      sha256: createHash('sha256').update('first').digest('hex'),
    });
    await assert.rejects(store.put(key, scratchWith('once-2', { 'o.txt': 'second' }), ['o.txt']), { code: 'EEXIST' });
    assert.equal(readFileSync(join(root, 'acme', 'j-once', '1', 'o.txt'), 'utf8'), 'first');
  });
});

describe('the S3 store', () => {
  it('names s3://bucket/<prefix>/<tenant>/<job>/<attempt>/<name>, and the worker computes each sha256 on the way', async () => {
    const store = s3.store('fleet/outputs');
    const scratch = scratchWith('sha', { 'r.bin': 'rendition' });
    const key = { tenant: 'acme', jobId: 'j1', attempt: 3 };
    const presigned = new PresignedOutputStore(await store.presignUploads(key, [{ name: 'r.bin', bytes: 9 }], 60_000));
    const stored = await presigned.put(key, scratch, ['r.bin']);
    assert.deepEqual(stored['r.bin'], {
      location: `s3://${s3.bucket}/fleet/outputs/acme/j1/3/r.bin`,
      bytes: 9,
      sha256: createHash('sha256').update('rendition').digest('hex'),
    });
  });

  it('a presigned URL used after it expired is refused by the store, and nothing is stored', async () => {
    const store = s3.store('expiry');
    const scratch = scratchWith('expired', { 'late.txt': 'too late' });
    const key = { tenant: 'acme', jobId: 'j-late', attempt: 1 };
    const uploads = await store.presignUploads(key, [{ name: 'late.txt', bytes: 8 }], 1000);
    await new Promise((resolve) => setTimeout(resolve, 2200));
    await assert.rejects(new PresignedOutputStore(uploads).put(key, scratch, ['late.txt']), (error: unknown) => {
      assert.ok(error instanceof StorageError);
      assert.equal(error.code, 'storage_refused');
      assert.match(error.message, /HTTP 403/);
      return true;
    });
    await assert.rejects(reader.send(new GetObjectCommand({ Bucket: s3.bucket, Key: store.keyOf(key, 'late.txt') })), /NoSuchKey|not exist/i);
  });

  it('a store that cannot be reached is storage_unreachable (Transient, retried as an attempt)', async () => {
    const port = await freePort();
    const store = new S3OutputStore({ bucket: 'b', prefix: '', endpoint: `http://127.0.0.1:${port}`, forcePathStyle: true, credentials: testS3Credentials });
    const scratch = scratchWith('unreachable', { 'x.txt': 'x' });
    const key = { tenant: 'acme', jobId: 'j-x', attempt: 1 };
    const uploads = await store.presignUploads(key, [{ name: 'x.txt', bytes: 1 }], 60_000);
    store.close();
    await assert.rejects(
      new PresignedOutputStore(uploads).put(key, scratch, ['x.txt']),
      (error: unknown) => error instanceof StorageError && error.code === 'storage_unreachable',
    );
  });

  it('output names that could leave the attempt prefix are refused; --store is s3://bucket/prefix', () => {
    for (const bad of ['', '/etc/passwd', '../x', 'a/../../x', 'a//b', './a', 'a\\b', 'a\nb']) assert.ok(outputNameProblem(bad), bad);
    for (const good of ['a.txt', 'sub/b.bin', 'rendition-720p.mp4']) assert.equal(outputNameProblem(good), undefined, good);
    assert.deepEqual(parseStoreUrl('s3://bucket/some/prefix/'), { bucket: 'bucket', prefix: 'some/prefix' });
    assert.deepEqual(parseStoreUrl('s3://bucket'), { bucket: 'bucket', prefix: '' });
    assert.throws(() => parseStoreUrl('https://bucket/x'));
    assert.throws(() => parseStoreUrl('s3://bucket/../x'));
  });
});
