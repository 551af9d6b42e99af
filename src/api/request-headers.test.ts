import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import { startEmbeddedApi, type ApiFixture } from '../../test/api/fixture.js';

interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: any;
}

/**
 * POST /v1/jobs over a plain socket, header lines and body written byte for byte: fetch
 * would join repeated headers into one and refuses header bytes it does not like.
 */
function rawPost(url: string, key: string, headers: Array<[string, string | Buffer]>, body: string | Buffer): Promise<RawAnswer> {
  const { hostname, port } = new URL(url);
  const payload = Buffer.from(body);
  const head = Buffer.concat([
    Buffer.from(`POST /v1/jobs HTTP/1.1\r\nhost: ${hostname}\r\nconnection: close\r\nauthorization: Bearer ${key}\r\ncontent-length: ${payload.length}\r\n`),
    ...headers.map(([name, value]) => Buffer.concat([Buffer.from(`${name}: `), Buffer.from(value), Buffer.from('\r\n')])),
    Buffer.from('\r\n'),
  ]);
  return new Promise((resolve, reject) => {
    // Written, not ended: a client that half-closes before the answer may get none (Node's
    // server ends a half-closed socket), and the server closes after answering (connection: close).
    const socket = connect(Number(port), hostname, () => socket.write(Buffer.concat([head, payload])));
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const [statusAndHeaders = '', content = ''] = text.split('\r\n\r\n', 2);
      const [statusLine = '', ...lines] = statusAndHeaders.split('\r\n');
      const parsed: Record<string, string> = {};
      for (const line of lines) parsed[line.slice(0, line.indexOf(':')).toLowerCase()] = line.slice(line.indexOf(':') + 1).trim();
      resolve({ status: Number(statusLine.split(' ')[1]), headers: parsed, body: JSON.parse(content) });
    });
  });
}

const json: [string, string] = ['content-type', 'application/json'];
const job = JSON.stringify({ type: 'probe', input: { note: 'café' } });

describe('request headers', () => {
  let api: ApiFixture;
  before(async () => {
    api = await startEmbeddedApi();
  });
  after(() => api.close());

  async function jobCount(): Promise<number> {
    const response = await fetch(`${api.url}/v1/jobs`, { headers: { authorization: `Bearer ${api.globexKey}` } });
    return ((await response.json()) as { jobs: unknown[] }).jobs.length;
  }

  it('a charset other than UTF-8 is refused with 415, not read as UTF-8; UTF-8 named any usual way is taken', async () => {
    const latin1 = await rawPost(api.url, api.globexKey, [['content-type', 'application/json; charset=iso-8859-1']], Buffer.from(job, 'latin1'));
    assert.equal(latin1.status, 415);
    assert.deepEqual(latin1.body, { error: { code: 'unsupported_media_type', message: 'charset "iso-8859-1" is not supported: bodies are UTF-8' } });
    assert.equal(await jobCount(), 0);
    for (const contentType of ['application/json; charset=UTF-8', 'application/json;charset="utf-8"']) {
      const answer = await rawPost(api.url, api.acmeKey, [['content-type', contentType]], job);
      assert.equal(answer.status, 202, contentType);
    }
  });

  it('a Content-Encoding other than identity is refused with 415 and Accept-Encoding: identity', async () => {
    const gzip = await rawPost(api.url, api.globexKey, [json, ['content-encoding', 'gzip']], gzipSync(job));
    assert.equal(gzip.status, 415);
    assert.equal(gzip.headers['accept-encoding'], 'identity');
    assert.deepEqual(gzip.body, { error: { code: 'unsupported_media_type', message: 'Content-Encoding "gzip" is not supported: send the body uncompressed' } });
    assert.equal((await rawPost(api.url, api.globexKey, [json, ['content-encoding', 'br']], job)).status, 415);
    assert.equal(await jobCount(), 0);
    assert.equal((await rawPost(api.url, api.acmeKey, [json, ['content-encoding', 'identity']], job)).status, 202);
  });

  it('two Idempotency-Key headers are refused with 400, not joined into one key', async () => {
    const answer = await rawPost(api.url, api.globexKey, [json, ['idempotency-key', 'a1'], ['Idempotency-Key', 'a2']], job);
    assert.equal(answer.status, 400);
    assert.deepEqual(answer.body, { error: { code: 'invalid_request', message: 'send one Idempotency-Key header, not 2' } });
    assert.equal(await jobCount(), 0);
  });

  it('a UTF-8 Idempotency-Key is stored and returned as UTF-8, and names the same job again; bytes that are not UTF-8 are a 400', async () => {
    const key = 'clé-✓-日本';
    const first = await rawPost(api.url, api.acmeKey, [json, ['idempotency-key', Buffer.from(key, 'utf8')]], job);
    assert.equal(first.status, 202);
    assert.equal(first.body.idempotencyKey, key);
    const again = await rawPost(api.url, api.acmeKey, [json, ['idempotency-key', Buffer.from(key, 'utf8')]], job);
    assert.equal(again.body.id, first.body.id);
    assert.equal(again.body.created, false);
    const stored = await fetch(`${api.url}/v1/jobs/${first.body.id}`, { headers: { authorization: `Bearer ${api.acmeKey}` } });
    assert.equal(((await stored.json()) as { idempotencyKey: string }).idempotencyKey, key);

    const latin1 = await rawPost(api.url, api.globexKey, [json, ['idempotency-key', Buffer.from('clé', 'latin1')]], job);
    assert.equal(latin1.status, 400);
    assert.equal(latin1.body.error.message, 'the Idempotency-Key header must be UTF-8 text');
    assert.equal(await jobCount(), 0);
  });

  it('a body with a duplicate key is taken, the last value winning (documented)', async () => {
    const answer = await rawPost(api.url, api.acmeKey, [json], '{"type":"nobody-offers-this","type":"probe","input":{}}');
    assert.equal(answer.status, 202);
    assert.equal(answer.body.type, 'probe');
  });
});
