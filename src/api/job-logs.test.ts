/**
 * Issue 14, job logs: what a job prints (stdout, stderr) and logs (ctx.log) is served per
 * attempt through `GET /v1/jobs/:id/attempts/:n/logs` and the client, followed live while
 * it runs, kept from another tenant, and a crash's last lines are in its error; on both ledgers.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Client } from '../client/client.js';
import { openPostgresLedger } from '../ledger/postgres/postgres-ledger.js';
import type { LogLine } from '../wire/logs.js';
import { fastTestUrl, TestSchemas } from '../../test/ledger/postgres/testing.js';
import { call, startEmbeddedApi, type ApiFixtureOptions } from '../../test/api/fixture.js';

const logJobsModule = fileURLToPath(new URL('../../test/worker/fixtures/log-jobs.js', import.meta.url));

const byStream = (lines: readonly LogLine[], stream: string) => lines.filter((line) => line.stream === stream).map((line) => line.message);
const numbered = (prefix: string, count: number) => Array.from({ length: count }, (_, i) => `${prefix} ${i + 1}`);

const schemas = new TestSchemas();
after(() => schemas.dropAll());

const ledgers: Array<[string, () => ApiFixtureOptions]> = [
  ['sqlite', () => ({})],
  ['postgres', () => ({ openLedger: (config) => openPostgresLedger({ connectionString: fastTestUrl(), schema: schemas.reserve(), config, poolSize: 4 }) })],
];

for (const [name, options] of ledgers) {
  describe(`job logs through the API and the client (${name} ledger)`, () => {
    it("follows an attempt's lines while it runs, then serves them as JSON lines and text; another tenant's key and an attempt not reached get 404", async () => {
      const api = await startEmbeddedApi(options());
      try {
        await api.harness.startWorker(api.connect(), { slots: 1, jobModules: [logJobsModule], timing: { logFlushMs: 50 } });
        const client = new Client({ url: api.url, key: api.acmeKey });
        const job = await client.submit('chatty', { lines: 8, intervalMs: 150 });

        const followed: LogLine[] = [];
        let firstWhileRunning: string | undefined;
        for await (const line of client.followLogs(job.id)) {
          followed.push(line);
          if (followed.length === 1) firstWhileRunning = (await client.get(job.id)).state;
        }
        assert.equal(firstWhileRunning, 'running', 'the first line came while the job ran');
        assert.deepEqual(byStream(followed, 'stdout'), numbered('out', 8));
        assert.deepEqual(byStream(followed, 'stderr'), numbered('err', 8));
        assert.deepEqual(byStream(followed, 'log'), numbered('log', 8));
        assert.deepEqual(followed.find((line) => line.message === 'log 3')?.fields, { i: 3 });
        const done = await client.wait(job.id, { timeoutMs: 20_000 });
        assert.equal(done.state, 'finished');

        const kept = await client.logs(job.id);
        assert.deepEqual(
          kept.map((line) => `${line.stream} ${line.message}`),
          followed.map((line) => `${line.stream} ${line.message}`),
          'the whole log is what was followed',
        );
        assert.ok(
          kept.every((line) => !Number.isNaN(Date.parse(line.time))),
          'every line has its time',
        );
        assert.deepEqual(await client.logs(job.id, { attempt: 1 }), kept);

        const jsonl = await fetch(`${api.url}/v1/jobs/${job.id}/attempts/1/logs`, { headers: { authorization: `Bearer ${api.acmeKey}` } });
        assert.equal(jsonl.status, 200);
        assert.match(String(jsonl.headers.get('content-type')), /^application\/x-ndjson/);
        const jsonLines = (await jsonl.text()).trimEnd().split('\n');
        assert.equal(jsonLines.length, 24);
        assert.deepEqual(JSON.parse(jsonLines[0]!), kept[0]);
        const text = await call(api.app, 'GET', `/v1/jobs/${job.id}/attempts/1/logs?format=text`, { key: api.acmeKey });
        assert.match(String(text.headers['content-type']), /^text\/plain/);
        assert.match(text.body, /^\d{4}-\d\d-\d\dT[\d:.]+Z stdout out 1\n/);
        assert.ok(text.body.includes(' log log 2 {"i":2}\n'), text.body);

        const otherTenant = await call(api.app, 'GET', `/v1/jobs/${job.id}/attempts/1/logs`, { key: api.globexKey });
        assert.deepEqual([otherTenant.status, otherTenant.body.error.code], [404, 'not_found']);
        const otherFollow = await call(api.app, 'GET', `/v1/jobs/${job.id}/attempts/1/logs?follow=1`, { key: api.globexKey });
        assert.equal(otherFollow.status, 404, 'following too');
        const admin = await fetch(`${api.url}/v1/jobs/${job.id}/attempts/1/logs`, { headers: { authorization: `Bearer ${api.adminKey}` } });
        assert.equal(admin.status, 200, 'an admin key reads every tenant');
        assert.equal((await admin.text()).trimEnd().split('\n').length, 24);
        const notReached = await call(api.app, 'GET', `/v1/jobs/${job.id}/attempts/2/logs`, { key: api.acmeKey });
        assert.deepEqual([notReached.status, notReached.body.error.code], [404, 'not_found']);
        assert.match(notReached.body.error.message, /has no attempt 2/);
        await assert.rejects(new Client({ url: api.url, key: api.globexKey }).logs(job.id), { code: 'not_found' });

        const openapi = await call(api.app, 'GET', '/openapi.json');
        assert.ok(openapi.body.paths['/v1/jobs/{id}/attempts/{n}/logs'], 'the route is in the OpenAPI document');
      } finally {
        await api.close();
      }
    });

    it("a crashing attempt's last lines are in its error (logTail), and in its log", async () => {
      const api = await startEmbeddedApi(options());
      try {
        await api.harness.startWorker(api.connect(), { slots: 1, jobModules: [logJobsModule], timing: { logFlushMs: 50 } });
        const client = new Client({ url: api.url, key: api.acmeKey });
        const job = await client.submit('chatty', { lines: 3, intervalMs: 10, crash: true }, { maxAttempts: 1 });
        const failed = await client.wait(job.id, { timeoutMs: 20_000 });
        assert.equal(failed.state, 'failed');
        const logTail = failed.error?.logTail ?? '';
        assert.ok(logTail.endsWith('about to crash'), `the error's log tail ends with the last line: ${JSON.stringify(failed.error)}`);
        for (const line of ['out 3', 'err 3', 'log 3']) assert.ok(logTail.split('\n').includes(line), `${line} in ${logTail}`);
        assert.equal(failed.attempts[0]?.error?.logTail, logTail, "the attempt's error has it too");
        const kept = await client.logs(job.id);
        assert.equal(kept.at(-1)?.message, 'about to crash');
      } finally {
        await api.close();
      }
    });
  });
}
