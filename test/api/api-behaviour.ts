/**
 * The HTTP API's core flow, written once and run on each broker (`api-embedded.test.ts`,
 * `api-rabbitmq.test.ts`): a real orchestrator, ledger and worker behind the API, every
 * step through HTTP. Each test gets its own harness, topology prefix and temp dir.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import type { BrokerConnections } from '../worker/behaviour.js';
import { probeOutputFile } from '../worker/fixtures/probe-jobs.js';
import { waitFor } from '../testing/wait.js';
import { call, readEventStream, startApi, type ApiFixture, type StreamedEvent } from './fixture.js';

export function apiBehaviour(name: string, makeConnections: () => Promise<BrokerConnections>): void {
  describe(`the HTTP API on ${name}`, () => {
    let connections: BrokerConnections;
    before(async () => {
      connections = await makeConnections();
    });
    after(async () => {
      await connections.close();
    });

    async function withApi(body: (api: ApiFixture) => Promise<void>): Promise<void> {
      const api = await startApi(await connections.connect());
      try {
        await body(api);
      } finally {
        await api.close();
      }
    }

    async function startWorker(api: ApiFixture): Promise<void> {
      await api.harness.startWorker(await connections.connect());
      await waitFor('the worker in the fleet', async () => (await call(api.app, 'GET', '/v1/fleet', { key: api.acmeKey })).body.workers.length > 0);
    }

    it('submit answers 202 with a Location; polling that location shows the job finished with its outputs', () =>
      withApi(async (api) => {
        await startWorker(api);
        const submitted = await call(api.app, 'POST', '/v1/jobs', {
          key: api.acmeKey,
          body: { type: 'probe', input: { ms: 150, steps: 3, runLog: api.harness.runLog } },
        });
        assert.equal(submitted.status, 202);
        assert.equal(submitted.body.state, 'queued');
        assert.equal(submitted.body.tenant, 'acme');
        assert.equal(submitted.body.created, true);
        assert.equal(submitted.headers.location, `/v1/jobs/${submitted.body.id}`);

        const job = await waitFor('the job to finish', async () => {
          const polled = await call(api.app, 'GET', String(submitted.headers.location), { key: api.acmeKey });
          assert.equal(polled.status, 200);
          return polled.body.state === 'finished' ? polled.body : undefined;
        });
        assert.equal(job.id, submitted.body.id);
        assert.equal(job.type, 'probe');
        assert.equal(job.attempt, 1);
        assert.equal(job.progress, 1);
        assert.equal(job.error, null);
        assert.equal(job.reason, null);
        assert.equal(job.result.data.attempt, 1);
        const output = job.result.outputs[probeOutputFile];
        assert.ok(existsSync(output), `the output ${output} exists`);
        assert.match(readFileSync(output, 'utf8'), /^attempt 1 /);
        assert.equal(job.attempts.length, 1);
        const [attempt] = job.attempts;
        assert.equal(attempt.attempt, 1);
        assert.equal(attempt.outcome, 'finished');
        assert.equal(attempt.error, null);
        assert.equal(typeof attempt.worker, 'string');
        for (const time of [job.createdAt, job.updatedAt, job.startedAt, job.endedAt, attempt.startedAt, attempt.endedAt]) {
          assert.equal(new Date(time).toISOString(), time, `${time} is an ISO time`);
        }
        await waitFor('the result message', () => api.harness.resultsFor(job.id).length > 0);
        assert.equal(api.harness.resultsFor(job.id).length, 1);
      }));

    it('the event stream shows the state, then progress, and ends with the terminal state; a late subscriber gets that at once', () =>
      withApi(async (api) => {
        await startWorker(api);
        const submitted = await call(api.app, 'POST', '/v1/jobs', {
          key: api.acmeKey,
          body: { type: 'probe', input: { ms: 600, steps: 4, runLog: api.harness.runLog } },
        });
        const live = await readEventStream(api, submitted.body.id, api.acmeKey);
        assert.equal(live.status, 200);
        const names = live.events.map((e) => e.event);
        assert.equal(names[0], 'state', 'the current state comes first');
        assert.ok(names.includes('progress'), `progress events came: ${names.join(', ')}`);
        const progress = live.events.filter((e) => e.event === 'progress').map((e) => e.data.progress as number);
        assert.deepEqual(
          progress,
          [...progress].sort((a, b) => a - b),
          'progress only grows',
        );
        const last = live.events[live.events.length - 1]!;
        assert.equal(last.event, 'state');
        assert.equal(last.data.state, 'finished');
        assert.equal(last.data.progress, 1);
        assert.ok(last.data.result.outputs[probeOutputFile]);
        assert.equal(live.events.filter((e) => ['finished', 'failed'].includes(e.data.state)).length, 1, 'one terminal event');
        assert.ok(
          live.events.some((e: StreamedEvent) => e.event === 'state' && e.data.state === 'running'),
          'the stream showed the job running',
        );

        const late = await readEventStream(api, submitted.body.id, api.acmeKey, { timeoutMs: 2_000 });
        assert.equal(late.events.length, 1);
        assert.equal(late.events[0]!.event, 'state');
        assert.equal(late.events[0]!.data.state, 'finished');
      }));

    it('a repeated Idempotency-Key answers with the same job, and runs it once', () =>
      withApi(async (api) => {
        await startWorker(api);
        const body = { type: 'probe', input: { ms: 50, runLog: api.harness.runLog } };
        const headers = { 'idempotency-key': 'order-42' };
        const first = await call(api.app, 'POST', '/v1/jobs', { key: api.acmeKey, body, headers });
        const again = await call(api.app, 'POST', '/v1/jobs', { key: api.acmeKey, body, headers });
        assert.equal(first.status, 202);
        assert.equal(again.status, 202);
        assert.equal(again.body.id, first.body.id);
        assert.equal(again.headers.location, first.headers.location);
        assert.deepEqual([first.body.created, again.body.created], [true, false]);
        assert.equal(again.body.idempotencyKey, 'order-42');
        // Keys are per tenant: another tenant's same key is another job.
        const other = await call(api.app, 'POST', '/v1/jobs', { key: api.globexKey, body, headers });
        assert.notEqual(other.body.id, first.body.id);
        assert.equal(other.body.created, true);
        await waitFor('both jobs to finish', async () =>
          (
            await Promise.all([first, other].map((s) => call(api.app, 'GET', `/v1/jobs/${s.body.id}`, { key: s === first ? api.acmeKey : api.globexKey })))
          ).every((polled) => polled.body.state === 'finished'),
        );
        assert.equal(api.harness.runs(first.body.id).length, 1);
      }));

    it('a job no worker of the fleet can run is accepted and fails at once, naming what is missing', () =>
      withApi(async (api) => {
        await startWorker(api);
        const needsGpu = await call(api.app, 'POST', '/v1/jobs', {
          key: api.acmeKey,
          body: { type: 'probe', input: { ms: 10, runLog: api.harness.runLog }, requires: ['gpu'] },
        });
        assert.equal(needsGpu.status, 202);
        assert.equal(needsGpu.body.state, 'failed');
        assert.equal(needsGpu.body.reason, 'unroutable');
        assert.equal(needsGpu.body.error.class, 'permanent');
        assert.equal(needsGpu.body.error.code, 'unroutable');
        assert.match(needsGpu.body.error.message, /missing "gpu"/);

        const unknownType = await call(api.app, 'POST', '/v1/jobs', { key: api.acmeKey, body: { type: 'render', input: {} } });
        assert.equal(unknownType.status, 202);
        assert.equal(unknownType.body.state, 'failed');
        assert.match(unknownType.body.error.message, /job type "render"/);
        assert.equal(api.harness.runs().length, 0);
      }));

    it('cancelling a running job marks it, and its worker stops it: it ends failed/cancelled', () =>
      withApi(async (api) => {
        await startWorker(api);
        const submitted = await call(api.app, 'POST', '/v1/jobs', {
          key: api.acmeKey,
          body: { type: 'probe', input: { ms: 20_000, steps: 200, runLog: api.harness.runLog } },
        });
        const path = `/v1/jobs/${submitted.body.id}`;
        await waitFor('the job to run', async () => (await call(api.app, 'GET', path, { key: api.acmeKey })).body.state === 'running');
        const cancelled = await call(api.app, 'POST', `${path}/cancel`, { key: api.acmeKey });
        assert.equal(cancelled.status, 200);
        assert.equal(cancelled.body.state, 'running');
        assert.equal(cancelled.body.cancelRequested, true);
        const ended = await waitFor('the job to end', async () => {
          const polled = await call(api.app, 'GET', path, { key: api.acmeKey });
          return polled.body.state === 'failed' ? polled.body : undefined;
        });
        assert.equal(ended.reason, 'cancelled');
        assert.equal(ended.attempts[0].outcome, 'cancelled');
        const again = await call(api.app, 'POST', `${path}/cancel`, { key: api.acmeKey });
        assert.equal(again.status, 409);
        assert.equal(again.body.error.code, 'conflict');
      }));
  });
}
