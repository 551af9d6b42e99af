/**
 * The client against the real HTTP API: an orchestrator on a SQLite ledger and one
 * worker running the `probe` job type, on the embedded broker, listening on a real socket.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { startApi, type ApiFixture } from '../../test/api/fixture.js';
import { EmbeddedBroker } from '../broker/embedded.js';
import { waitFor } from '../../test/testing/wait.js';
import { probeOutputFile } from '../../test/worker/fixtures/probe-jobs.js';
import { Client } from './client.js';
import { PlanrunApiError } from './errors.js';
import type { JobEvent } from './types.js';

/** Asserts that `promise` fails with a PlanrunApiError of `code` (and `status`, when given). */
async function rejectsWith(promise: Promise<unknown>, code: string, status?: number): Promise<PlanrunApiError> {
  let caught: unknown;
  await assert.rejects(promise, (error: unknown) => {
    caught = error;
    return true;
  });
  assert.ok(caught instanceof PlanrunApiError, `expected a PlanrunApiError, got ${String(caught)}`);
  assert.equal(caught.code, code, caught.message);
  if (status !== undefined) assert.equal(caught.status, status);
  return caught;
}

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('the client, against the real API', () => {
  let broker: EmbeddedBroker;
  let api: ApiFixture;
  let client: Client;
  const probe = (input: { ms: number; steps?: number; fail?: 'permanent' | 'transient' }) => ({ runLog: api.harness.runLog, ...input });

  before(async () => {
    broker = new EmbeddedBroker();
    api = await startApi(broker.connect(), { ledgerConfig: { backoffBaseMs: 50 } });
    await api.harness.startWorker(broker.connect(), { slots: 4 });
    client = new Client({ url: api.url, key: api.acmeKey });
    await waitFor('the worker in the fleet', async () => (await client.fleet()).workers.length > 0);
  });
  after(async () => {
    await api.close();
    await broker.close();
  });

  it('submits a job, reads it, and waits until it finished with its result and outputs', async () => {
    const submitted = await client.submit('probe', probe({ ms: 200, steps: 4 }));
    assert.equal(submitted.created, true);
    assert.equal(submitted.state, 'queued');
    assert.equal(submitted.tenant, 'acme');
    assert.equal(submitted.type, 'probe');

    const read = await client.get(submitted.id);
    assert.equal(read.id, submitted.id);
    assert.ok(['queued', 'running', 'finished'].includes(read.state));

    const finished = await client.wait(submitted.id, { timeoutMs: 10_000 });
    assert.equal(finished.state, 'finished');
    assert.equal(finished.attempt, 1);
    assert.equal(finished.progress, 1);
    assert.equal(finished.error, null);
    assert.deepEqual(finished.result?.data, { pid: (finished.result?.data as { pid: number }).pid, attempt: 1 });
    assert.ok(existsSync(finished.result.outputs![probeOutputFile]!), 'the output is where the result says');
    assert.equal(finished.attempts.length, 1);
    assert.equal(finished.attempts[0]!.outcome, 'finished');
  });

  it('the events iterator yields the state, progress, and ends with the terminal state', async () => {
    const { id } = await client.submit('probe', probe({ ms: 600, steps: 4 }));
    const events: JobEvent[] = [];
    for await (const event of client.events(id)) events.push(event);
    const last = events.at(-1)!;
    assert.equal(last.type, 'state');
    assert.equal(last.job.state, 'finished');
    assert.equal(events[0]!.type, 'state');
    const progress = events.filter((e) => e.type === 'progress').map((e) => e.job.progress!);
    assert.ok(progress.length >= 2, `progress events: ${JSON.stringify(progress)}`);
    assert.deepEqual(
      progress,
      [...progress].sort((a, b) => a - b),
      'progress only grows',
    );
    assert.ok(
      events.slice(0, -1).every((e) => e.job.state !== 'finished' && e.job.state !== 'failed'),
      'only the last event is terminal',
    );

    // Connecting after the end gets the terminal event at once.
    const late: JobEvent[] = [];
    for await (const event of client.events(id)) late.push(event);
    assert.deepEqual(
      late.map((e) => [e.type, e.job.state]),
      [['state', 'finished']],
    );
  });

  it('wait reports events on the way, and answers a failed job with its error and reason', async () => {
    const { id } = await client.submit('probe', probe({ ms: 100, steps: 2, fail: 'permanent' }));
    const seen: JobEvent[] = [];
    const failed = await client.wait(id, { onEvent: (event) => seen.push(event), timeoutMs: 10_000 });
    assert.equal(failed.state, 'failed');
    assert.equal(failed.reason, 'permanent');
    assert.deepEqual(failed.error, { class: 'permanent', code: 'probe_permanent', message: 'failed permanently on purpose' });
    assert.equal(seen.at(-1)?.job.state, 'failed');
  });

  it('a non-ASCII idempotency key travels as UTF-8: the same text names the same job in the header and in a batch', async () => {
    const key = `commande-été-✓-${Date.now()}`;
    const first = await client.submit('probe', probe({ ms: 10 }), { idempotencyKey: key });
    assert.equal(first.idempotencyKey, key);
    const [again] = await client.submitMany([{ type: 'probe', input: probe({ ms: 10 }), idempotencyKey: key }]);
    assert.equal(again!.id, first.id);
    assert.equal(again!.created, false);
  });

  it('the same idempotency key answers with the same job, alone or in a batch', async () => {
    const key = `order-${Date.now()}`;
    const first = await client.submit('probe', probe({ ms: 10 }), { idempotencyKey: key });
    const again = await client.submit('probe', probe({ ms: 10 }), { idempotencyKey: key });
    assert.equal(again.id, first.id);
    assert.equal(first.created, true);
    assert.equal(again.created, false);

    const batch = await client.submitMany([
      { type: 'probe', input: probe({ ms: 10 }), idempotencyKey: `${key}-b` },
      { type: 'probe', input: probe({ ms: 10 }), idempotencyKey: key },
      { type: 'probe', input: probe({ ms: 10 }), maxAttempts: 2 },
    ]);
    assert.equal(batch.length, 3);
    assert.equal(batch[1]!.id, first.id);
    assert.deepEqual(
      batch.map((j) => j.created),
      [true, false, true],
    );
    assert.equal(batch[2]!.maxAttempts, 2);
    for (const job of batch) assert.equal((await client.wait(job.id, { timeoutMs: 10_000 })).state, 'finished');
  });

  it('lists jobs by state and type, a page at a time', async () => {
    const { id } = await client.submit('probe', probe({ ms: 10 }));
    await client.wait(id, { timeoutMs: 10_000 });
    const page = await client.list({ state: 'finished', type: 'probe', limit: 1 });
    assert.equal(page.jobs.length, 1);
    assert.equal(page.jobs[0]!.state, 'finished');
    assert.ok(page.nextCursor, 'there is a next page');
    const next = await client.list({ state: 'finished', cursor: page.nextCursor });
    assert.ok(next.jobs.length >= 1);
    assert.ok(!next.jobs.some((j) => j.id === page.jobs[0]!.id), 'the next page does not repeat the first');
    assert.deepEqual((await client.list({ type: 'no-such-type' })).jobs, []);
  });

  it('cancels a running job, which then fails as cancelled', async () => {
    const { id } = await client.submit('probe', probe({ ms: 5_000, steps: 50 }));
    await waitFor('the job to run', async () => (await client.get(id)).state === 'running');
    const cancelled = await client.cancel(id);
    assert.ok(cancelled.cancelRequested || cancelled.state === 'failed');
    const ended = await client.wait(id, { timeoutMs: 10_000 });
    assert.equal(ended.state, 'failed');
    assert.equal(ended.reason, 'cancelled');
    await rejectsWith(client.cancel(id), 'conflict', 409);
  });

  it('is what the package exports', async () => {
    const planrun = await import('../index.js');
    assert.equal(planrun.Client, Client);
    assert.equal(planrun.PlanrunApiError, PlanrunApiError);
  });

  it('shows the fleet', async () => {
    const { workers } = await client.fleet();
    assert.equal(workers.length, 1);
    assert.ok(workers[0]!.jobTypes.includes('probe'));
    assert.equal(workers[0]!.slots, 4);
  });

  it('API errors carry the status, code and message the API sent', async () => {
    const missing = await rejectsWith(client.get('no-such-job'), 'not_found', 404);
    assert.match(missing.message, /no-such-job/);
    await rejectsWith(client.wait('no-such-job'), 'not_found', 404);
    await rejectsWith(client.events('no-such-job').next(), 'not_found', 404);

    const invalid = await rejectsWith(client.submit('not a type!', {}), 'invalid_request', 400);
    assert.match(invalid.message, /type/, 'the message names the field');
    await rejectsWith(client.submit('probe', {}, { maxAttempts: 0 }), 'invalid_request', 400);
    await rejectsWith(client.submit('probe', { blob: 'x'.repeat(2 * 1024 * 1024) }), 'payload_too_large', 413);

    await rejectsWith(new Client({ url: api.url, key: 'not-a-key' }).get('anything'), 'unauthorized', 401);
    // Another tenant's job is as missing as one that never existed.
    const { id } = await client.submit('probe', probe({ ms: 10 }));
    await rejectsWith(new Client({ url: api.url, key: api.globexKey }).get(id), 'not_found', 404);
  });

  it('a server that cannot be reached fails with code unreachable, naming the URL', async () => {
    const url = `http://127.0.0.1:${await closedPort()}`;
    const offline = new Client({ url, key: 'k', reconnect: { initialDelayMs: 10, maxDelayMs: 20, giveUpAfterMs: 200 } });
    const error = await rejectsWith(offline.get('job-1'), 'unreachable', 0);
    assert.ok(error.message.includes(url), error.message);
    assert.match(error.message, /ECONNREFUSED/);
    const started = Date.now();
    await rejectsWith(offline.wait('job-1'), 'unreachable', 0);
    assert.ok(Date.now() - started < 2_000, 'wait gives up after the reconnect policy');
  });
});
