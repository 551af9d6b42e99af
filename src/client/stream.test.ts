/**
 * The client's event stream against a stub server that speaks the API's contract, for
 * what the real API does not do on demand: connections cut mid-stream, events split
 * across writes, a stream that goes silent, an events endpoint that stops answering.
 * Everything else is tested against the real API (client.test.ts).
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { Client } from './client.js';
import { PlanrunApiError } from './errors.js';
import type { JobEvent, JobSummary, JobView } from './types.js';

type Handler = (request: IncomingMessage, response: ServerResponse) => void | Promise<void>;

function job(state: JobSummary['state'], progress: number | null = null, attempt = 1): JobView {
  return {
    id: 'job-1',
    type: 'probe',
    tenant: 'acme',
    state,
    waitingFor: null,
    attempt,
    maxAttempts: 3,
    timeoutSeconds: null,
    limits: null,
    requires: [],
    idempotencyKey: null,
    cancelRequested: false,
    progress,
    progressMessage: progress === null ? null : `at ${progress}`,
    result: state === 'finished' ? { data: { ok: true } } : null,
    error: null,
    reason: null,
    createdAt: '2026-01-01T00:00:00.000Z',
    updatedAt: '2026-01-01T00:00:01.000Z',
    startedAt: state === 'queued' ? null : '2026-01-01T00:00:00.500Z',
    endedAt: state === 'finished' || state === 'failed' ? '2026-01-01T00:00:01.000Z' : null,
    attempts: [],
    retryOf: null,
    retriedBy: null,
  };
}

function sse(event: string, data: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

function openStream(response: ServerResponse): void {
  response.writeHead(200, { 'content-type': 'text/event-stream' });
  response.flushHeaders();
}

describe('the event stream, against a stub server', () => {
  let server: Server;
  let url: string;
  let handler: Handler = (_request, response) => void response.end();
  const requests: Array<{ method: string; url: string; authorization: string | undefined }> = [];

  before(async () => {
    server = createServer((request, response) => {
      requests.push({ method: request.method!, url: request.url!, authorization: request.headers.authorization });
      void handler(request, response);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  function client(): Client {
    requests.length = 0;
    return new Client({ url, key: 'k-test', reconnect: { initialDelayMs: 20, maxDelayMs: 50, giveUpAfterMs: 1_000, idleTimeoutMs: 300 } });
  }

  async function collect(events: AsyncIterable<JobEvent>): Promise<JobEvent[]> {
    const seen: JobEvent[] = [];
    for await (const event of events) seen.push(event);
    return seen;
  }

  it('reconnects when the connection is cut before the terminal event, without repeating what it said', async () => {
    let connection = 0;
    handler = async (_request, response) => {
      connection++;
      openStream(response);
      if (connection === 1) {
        response.write(sse('state', job('running', null)));
        response.write(sse('progress', job('running', 0.25)));
        // Half an event, then the connection drops.
        response.write('event: progress\ndata: {"id":"jo');
        await delay(20);
        response.destroy();
        return;
      }
      // On reconnect the server says where the job stands, then goes on.
      response.write(sse('state', job('running', 0.25)));
      response.write(sse('progress', job('running', 0.75)));
      response.end(sse('state', job('finished', 1)));
    };
    const events = await collect(client().events('job-1'));
    assert.deepEqual(
      events.map((e) => [e.type, e.job.state, e.job.progress]),
      [
        ['state', 'running', null],
        ['progress', 'running', 0.25],
        ['state', 'running', 0.25],
        ['progress', 'running', 0.75],
        ['state', 'finished', 1],
      ],
    );
    assert.equal(connection, 2);
    assert.ok(requests.every((r) => r.url === '/v1/jobs/job-1/events' && r.authorization === 'Bearer k-test'));
  });

  it('skips an event replayed unchanged on reconnect', async () => {
    let connection = 0;
    handler = async (_request, response) => {
      connection++;
      openStream(response);
      response.write(sse('state', job('running', 0.5)));
      if (connection === 1) {
        await delay(20);
        response.destroy();
      } else response.end(sse('state', job('finished', 1)));
    };
    const events = await collect(client().events('job-1'));
    assert.deepEqual(
      events.map((e) => e.job.state),
      ['running', 'finished'],
    );
  });

  it('puts together events split across writes, one byte at a time', async () => {
    handler = async (_request, response) => {
      openStream(response);
      const text = `: keep-alive\r\n\r\n${sse('state', job('running'))}${sse('progress', { ...job('running', 0.5), progressMessage: 'étape ✓' })}${sse('state', job('finished', 1))}`;
      for (const byte of Buffer.from(text)) {
        response.write(Buffer.of(byte));
        if (byte === 0x0a) await delay(1);
      }
      response.end();
    };
    const events = await collect(client().events('job-1'));
    assert.deepEqual(
      events.map((e) => [e.type, e.job.state, e.job.progressMessage]),
      [
        ['state', 'running', null],
        ['progress', 'running', 'étape ✓'],
        ['state', 'finished', 'at 1'],
      ],
    );
  });

  it('reopens a stream that went silent', async () => {
    let connection = 0;
    handler = (_request, response) => {
      connection++;
      openStream(response);
      if (connection === 1) response.write(sse('state', job('running')));
      else response.end(sse('state', job('finished', 1)));
    };
    const started = Date.now();
    const events = await collect(client().events('job-1'));
    assert.deepEqual(
      events.map((e) => e.job.state),
      ['running', 'finished'],
    );
    assert.equal(connection, 2);
    assert.ok(Date.now() - started >= 250, 'it waited for the idle timeout');
  });

  it('fails at once when the API refuses the stream, with the code it sent', async () => {
    handler = (_request, response) => {
      response.writeHead(404, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ error: { code: 'not_found', message: 'no job job-1' } }));
    };
    const stub = client();
    await assert.rejects(collect(stub.events('job-1')), (error: unknown) => {
      assert.ok(error instanceof PlanrunApiError);
      assert.equal(error.code, 'not_found');
      assert.equal(error.status, 404);
      assert.equal(error.message, 'no job job-1');
      return true;
    });
    assert.equal(requests.length, 1, 'a refusal is not retried');
  });

  it('wait reopens a stream that dropped, telling each change once, and answers with a read of the ended job', async () => {
    let streams = 0;
    handler = async (request, response) => {
      if (request.url?.endsWith('/events')) {
        streams++;
        openStream(response);
        response.write(sse('state', job('running', 0.1)));
        if (streams === 1) {
          await delay(20);
          response.destroy();
          return;
        }
        response.write(sse('progress', job('running', 0.6)));
        response.end(sse('state', job('finished', 1)));
        return;
      }
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify(streams < 2 ? job('running', 0.1) : { ...job('finished', 1), attempts: [{ attempt: 1 }] }));
    };
    const seen: JobEvent[] = [];
    const finished = await client().wait('job-1', { onEvent: (event) => seen.push(event) });
    assert.equal(finished.state, 'finished');
    assert.equal(finished.attempts.length, 1, 'the answer is the read, with the attempts');
    assert.equal(streams, 2);
    assert.deepEqual(
      seen.map((e) => [e.type, e.job.state, e.job.progress]),
      [
        ['state', 'running', 0.1],
        ['progress', 'running', 0.6],
        ['state', 'finished', 1],
      ],
    );
  });

  it('wait polls when the stream keeps failing, and stops reopening it after three failures in a row', async () => {
    let polls = 0;
    let streams = 0;
    handler = async (request, response) => {
      if (request.url?.endsWith('/events')) {
        streams++;
        if (streams === 1) {
          openStream(response);
          response.write(sse('state', job('running', 0.1)));
          await delay(20);
          response.destroy();
        } else {
          response.writeHead(503, { 'content-type': 'application/json' });
          response.end(JSON.stringify({ error: { code: 'unavailable', message: 'no streams today' } }));
        }
        return;
      }
      polls++;
      const current = polls < 6 ? job('running', 0.5) : job('finished', 1);
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify(current));
    };
    const seen: JobEvent[] = [];
    const finished = await client().wait('job-1', { onEvent: (event) => seen.push(event) });
    assert.equal(finished.state, 'finished');
    assert.deepEqual(finished.result, { data: { ok: true } });
    assert.equal(polls, 6);
    assert.equal(streams, 4, 'one stream that dropped, then three refused, then polls alone');
    assert.deepEqual(
      seen.map((e) => [e.type, e.job.state, e.job.progress]),
      [
        ['state', 'running', 0.1],
        ['progress', 'running', 0.5],
        ['state', 'finished', 1],
      ],
    );
  });

  it('wait gives up with code timeout rather than answer with a job that has not ended', async () => {
    handler = (_request, response) => {
      openStream(response);
      response.write(sse('state', job('running', 0.5)));
    };
    const started = Date.now();
    await assert.rejects(client().wait('job-1', { timeoutMs: 150 }), (error: unknown) => {
      assert.ok(error instanceof PlanrunApiError);
      assert.equal(error.code, 'timeout');
      assert.match(error.message, /job-1 did not end within 150 ms \(last seen running, attempt 1\)/);
      return true;
    });
    assert.ok(Date.now() - started < 1_000);
  });

  it('wait stops when its signal is aborted, with the signal’s reason', async () => {
    handler = (_request, response) => {
      openStream(response);
      response.write(sse('state', job('queued')));
    };
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error('user pressed ^C')), 50);
    await assert.rejects(client().wait('job-1', { signal: controller.signal }), /user pressed \^C/);
  });

  it('an answer that is not the API’s error shape still gets a code from its status', async () => {
    handler = (_request, response) => {
      response.writeHead(502, { 'content-type': 'text/html' });
      response.end('<h1>Bad gateway</h1>');
    };
    await assert.rejects(client().get('job-1'), (error: unknown) => {
      assert.ok(error instanceof PlanrunApiError);
      assert.equal(error.status, 502);
      assert.equal(error.code, 'http_502');
      assert.match(error.message, /HTTP 502 from http:\/\/127\.0\.0\.1:\d+\/v1\/jobs\/job-1/);
      return true;
    });
  });
});
