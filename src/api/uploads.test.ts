/**
 * `POST /v1/uploads` (issue 11, inputs): a presigned PUT for one file of the caller's
 * tenant, under `<prefix>/<tenant>/uploads/<id>/<name>`, and the `s3://` location a job's
 * input names it by; the typed Client's `upload` streams a file through it. With no
 * object store the route answers 409 `no_object_store`. The S3-protocol server (s3rver)
 * runs in this process on a free port.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { call, startEmbeddedApi, withEmbeddedApi, type ApiFixture } from '../../test/api/fixture.js';
import { startS3Server, testS3Credentials, type TestS3Server } from '../../test/testing/s3-server.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { Client } from '../client/client.js';
import { isPlanrunApiError } from '../client/errors.js';
import { maxUploadBytes } from '../wire/uploads.js';

describe('POST /v1/uploads', () => {
  it('without an object store: 409 no_object_store, saying so; without a key: 401', async () => {
    await withEmbeddedApi(async (api) => {
      const answer = await call(api.app, 'POST', '/v1/uploads', { key: api.acmeKey, body: { name: 'clip.mp4', bytes: 10 } });
      assert.equal(answer.status, 409);
      assert.equal(answer.body.error.code, 'no_object_store');
      assert.match(answer.body.error.message, /no object store \(--store\)/);
      assert.equal((await call(api.app, 'POST', '/v1/uploads', { body: { name: 'clip.mp4', bytes: 10 } })).status, 401);
      const client = new Client({ url: api.url, key: api.acmeKey });
      const file = tempDir('planrun-upload-');
      writeFileSync(join(file.path, 'clip.mp4'), 'x');
      await assert.rejects(client.upload(join(file.path, 'clip.mp4')), (error) => isPlanrunApiError(error) && error.code === 'no_object_store');
      file.remove();
    });
  });

  describe('with an object store', () => {
    let s3: TestS3Server;
    let api: ApiFixture;
    const files = tempDir('planrun-upload-');
    let reader: S3Client;

    before(async () => {
      s3 = await startS3Server();
      api = await startEmbeddedApi({ objectStore: s3.store('up') });
      reader = new S3Client({ endpoint: s3.endpoint, forcePathStyle: true, region: 'us-east-1', credentials: testS3Credentials });
    });
    after(async () => {
      reader?.destroy();
      await api?.close();
      await s3?.stop();
      files.remove();
    });

    async function stored(location: string): Promise<Buffer> {
      const key = location.slice(`s3://${s3.bucket}/`.length);
      const object = await reader.send(new GetObjectCommand({ Bucket: s3.bucket, Key: key }));
      return Buffer.from(await object.Body!.transformToByteArray());
    }

    it("answers a presigned PUT under the caller's own tenant, and the object is there once the file is PUT", async () => {
      const body = Buffer.from('the bytes of an uploaded clip\n');
      const before = Date.now();
      const answer = await call(api.app, 'POST', '/v1/uploads', { key: api.acmeKey, body: { name: 'clip.mp4', bytes: body.length } });
      assert.equal(answer.status, 200, JSON.stringify(answer.body));
      assert.match(answer.body.location, new RegExp(`^s3://${s3.bucket}/up/acme/uploads/[0-9a-f-]{36}/clip\\.mp4$`));
      assert.match(answer.body.url, /X-Amz-Signature=/);
      const expiresAt = Date.parse(answer.body.expiresAt);
      assert.ok(expiresAt >= before + 59 * 60_000 && expiresAt <= Date.now() + 60 * 60_000, answer.body.expiresAt);
      const put = await fetch(answer.body.url, { method: 'PUT', body });
      assert.equal(put.status, 200);
      assert.deepEqual(await stored(answer.body.location), body);

      const globex = await call(api.app, 'POST', '/v1/uploads', { key: api.globexKey, body: { name: 'clip.mp4', bytes: body.length } });
      assert.match(globex.body.location, /\/up\/globex\/uploads\//, 'each tenant uploads under its own keys');
      assert.notEqual(globex.body.location.split('/')[6], answer.body.location.split('/')[6], 'every upload has an id of its own');
    });

    it('an admin key uploads under the tenant it names, and must name one; a tenant key may not', async () => {
      const forGlobex = await call(api.app, 'POST', '/v1/uploads', { key: api.adminKey, body: { name: 'clip.mp4', bytes: 1, tenant: 'globex' } });
      assert.equal(forGlobex.status, 200, JSON.stringify(forGlobex.body));
      assert.match(forGlobex.body.location, /\/up\/globex\/uploads\//);
      const unnamed = await call(api.app, 'POST', '/v1/uploads', { key: api.adminKey, body: { name: 'clip.mp4', bytes: 1 } });
      assert.equal(unnamed.status, 400);
      assert.match(unnamed.body.error.message, /^body must have property "tenant" with an admin key/);
      const badName = await call(api.app, 'POST', '/v1/uploads', { key: api.adminKey, body: { name: 'clip.mp4', bytes: 1, tenant: 'a.b' } });
      assert.equal(badName.status, 400);
      assert.match(badName.body.error.message, /^tenant name "a.b" must start with a letter/);
      const tenantNaming = await call(api.app, 'POST', '/v1/uploads', { key: api.acmeKey, body: { name: 'clip.mp4', bytes: 1, tenant: 'globex' } });
      assert.equal(tenantNaming.status, 400);
      assert.equal(tenantNaming.body.error.message, 'body must NOT have property "tenant"');
    });

    it('refuses a name with a folder, . or .., a control character, a size over 5 GiB, and unknown fields: 400', async () => {
      const bad = [
        { name: 'a/b.mp4', bytes: 1 },
        { name: '..', bytes: 1 },
        { name: '.', bytes: 1 },
        { name: 'a\\b', bytes: 1 },
        { name: 'a\nb', bytes: 1 },
        { name: '', bytes: 1 },
        { name: 'clip.mp4', bytes: -1 },
        { name: 'clip.mp4', bytes: maxUploadBytes + 1 },
        { name: 'clip.mp4' },
        { name: 'clip.mp4', bytes: 1, tenant: 'globex' },
      ];
      for (const body of bad) {
        const answer = await call(api.app, 'POST', '/v1/uploads', { key: api.acmeKey, body });
        assert.equal(answer.status, 400, JSON.stringify(body));
        assert.equal(answer.body.error.code, 'invalid_request', JSON.stringify(body));
      }
    });

    it('Client.upload streams a file through it, reporting progress, and returns its location', async () => {
      const path = join(files.path, 'two mib.bin');
      const content = Buffer.alloc(2 * 1024 * 1024 + 5, 9);
      writeFileSync(path, content);
      const seen: number[] = [];
      const client = new Client({ url: api.url, key: api.acmeKey });
      const uploaded = await client.upload(path, { onProgress: (sent, total) => (assert.equal(total, content.length), seen.push(sent)) });
      assert.equal(uploaded.bytes, content.length);
      assert.match(uploaded.location, /\/up\/acme\/uploads\/[0-9a-f-]{36}\/two mib\.bin$/);
      assert.deepEqual(await stored(uploaded.location), content);
      assert.ok(seen.length >= 2, `progress as it went: ${seen.join(',')}`);
      assert.equal(seen.at(-1), content.length);
      assert.deepEqual(
        seen,
        [...seen].sort((a, b) => a - b),
        'progress only moves forward',
      );
    });
  });
});
