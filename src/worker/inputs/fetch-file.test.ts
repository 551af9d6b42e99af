/**
 * fetchFile against a real HTTP server in this process: how each way a fetch can fail is
 * classified, and that a failed fetch leaves nothing in the target folder (no partial file).
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { tempDir } from '../../../test/testing/temp-dir.js';
import { fetchFile } from './fetch-file.js';

const body = Buffer.alloc(3 * 1024 * 1024, 5);

const routes: Record<string, (request: IncomingMessage, response: ServerResponse) => void> = {
  '/whole': (_request, response) => response.end(body),
  // Half the bytes, then the connection is cut.
  '/cut': (_request, response) => {
    response.writeHead(200, { 'content-length': String(body.length) });
    response.write(body.subarray(0, body.length >> 1), () => response.socket?.destroy());
  },
  // Some bytes, then nothing more.
  '/stall': (_request, response) => {
    response.writeHead(200);
    response.write(body.subarray(0, 1024));
  },
  '/forbidden': (_request, response) => response.writeHead(403).end(),
  '/busy': (_request, response) => response.writeHead(503).end(),
  '/gone': (_request, response) => response.writeHead(410).end(),
};

describe('fetchFile', () => {
  const dir = tempDir('planrun-fetch-');
  const server = createServer((request, response) => {
    const route = routes[request.url ?? ''];
    if (route) route(request, response);
    else response.writeHead(404).end();
  });
  let base: string;
  let n = 0;

  before(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => {
    server.closeAllConnections();
    server.close();
    dir.remove();
  });

  function fetchInto(path: string, options: { maxBytes?: number; idleTimeoutMs?: number; signal?: AbortSignal } = {}) {
    const folder = join(dir.path, String(++n));
    const target = join(folder, 'file.bin');
    mkdirSync(folder);
    const done = fetchFile(`${base}${path}`, target, {
      label: `${base}${path}`,
      maxBytes: options.maxBytes ?? 10 * 1024 * 1024,
      idleTimeoutMs: options.idleTimeoutMs ?? 5_000,
      signal: options.signal ?? new AbortController().signal,
    });
    return { folder, target, done };
  }

  it('streams the whole body into the target, under its name only once complete', async () => {
    const { folder, target, done } = fetchInto('/whole');
    assert.deepEqual(await done, { bytes: body.length });
    assert.equal(createHash('sha256').update(readFileSync(target)).digest('hex'), createHash('sha256').update(body).digest('hex'));
    assert.deepEqual(readdirSync(folder), ['file.bin']);
  });

  const failures: Array<{
    what: string;
    path: string;
    options?: { maxBytes?: number; idleTimeoutMs?: number };
    errorClass: string;
    code: string;
    message: RegExp;
  }> = [
    { what: 'a connection cut halfway', path: '/cut', errorClass: 'transient', code: 'input_unreachable', message: /cannot be fetched/ },
    {
      what: 'a server that stalls',
      path: '/stall',
      options: { idleTimeoutMs: 300 },
      errorClass: 'transient',
      code: 'input_unreachable',
      message: /nothing came for 300 ms/,
    },
    { what: 'a 503', path: '/busy', errorClass: 'transient', code: 'input_unreachable', message: /HTTP 503/ },
    { what: 'a 403', path: '/forbidden', errorClass: 'permanent', code: 'input_refused', message: /HTTP 403/ },
    { what: 'a 410', path: '/gone', errorClass: 'permanent', code: 'input_missing', message: /does not exist \(HTTP 410\)/ },
    {
      what: 'a body over the cap',
      path: '/whole',
      options: { maxBytes: body.length - 1 },
      errorClass: 'permanent',
      code: 'input_too_large',
      message: /larger than the 3145727-byte cap/,
    },
  ];
  for (const { what, path, options, errorClass, code, message } of failures) {
    it(`${what}: ${errorClass} ${code}, naming the URL, nothing left behind`, async () => {
      const { folder, done } = fetchInto(path, options);
      await assert.rejects(done, (error: { errorClass?: string; code?: string; message?: string }) => {
        assert.equal(error.errorClass, errorClass, error.message);
        assert.equal(error.code, code, error.message);
        assert.match(error.message ?? '', message);
        assert.ok(error.message?.includes(`${base}${path}`), error.message);
        return true;
      });
      assert.deepEqual(readdirSync(folder), [], 'no partial file');
    });
  }

  it('an abort (the lease is lost) stops the fetch with the signal’s reason, nothing left behind', async () => {
    const abort = new AbortController();
    const { folder, done } = fetchInto('/stall', { signal: abort.signal });
    setTimeout(() => abort.abort(new Error('lease lost: superseded')), 100);
    await assert.rejects(done, /lease lost: superseded/);
    assert.deepEqual(readdirSync(folder), []);
  });
});
