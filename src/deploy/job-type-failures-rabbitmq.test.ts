/**
 * Issue 19, "Job types", through `planrun orchestrator` and `planrun worker` as an
 * operator runs them (RabbitMQ; SQLite and PostgreSQL ledgers), with a TypeScript job
 * module the worker loads directly:
 * - a job type whose `requires` no worker meets fails at once naming the capability it
 *   lacks, not only "no worker offers job type ...";
 * - a plain Error thrown by job code keeps its stack (bounded, pointing at the .ts line)
 *   with the attempt's error, where GET /v1/jobs/:id shows it.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Broker } from '../broker/broker.js';
import { RabbitMqBroker } from '../broker/rabbitmq.js';
import { Client } from '../client/client.js';
import { MAX_ERROR_STACK_LENGTH } from '../core/errors.js';
import { KeyStore } from '../keys/key-store.js';
import { fastTestUrl, freshSchemaName, TestSchemas } from '../../test/ledger/postgres/testing.js';
import { freePort } from '../../test/testing/free-port.js';
import { packageRoot } from '../../test/testing/package-root.js';
import { rabbitMqUrl } from '../../test/testing/services.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { waitFor } from '../../test/testing/wait.js';
import { startPlanrunProcess, startWorkerProcess, type WorkerProcess } from '../../test/testing/worker-process.js';
import { Topology } from '../topology.js';

const jobsSource = [
  "import { defineJobType } from 'planrun';", //                                      1
  'interface Frame {', //                                                             2
  '  width: number;', //                                                              3
  '}', //                                                                             4
  'function widthOf(frame: Frame | undefined): number {', //                           5
  '  return frame!.width;', //                                                        6
  '}', //                                                                             7
  'export default [', //                                                              8
  "  defineJobType({ name: 'thumbnail', requires: ['imagemagick'], run: () => ({}) }),",
  "  defineJobType({ name: 'buggy', run: () => ({ data: widthOf(undefined) }) }),",
  "  defineJobType({ name: 'deep', run: () => { throw new Error('m'.repeat(20_000)); } }),",
  '];',
].join('\n');

for (const ledger of ['sqlite', 'postgres'] as const) {
  describe(`job type failures told through planrun orchestrator and worker (RabbitMQ, ${ledger === 'sqlite' ? 'SQLite' : 'PostgreSQL'})`, () => {
    const dir = tempDir('planrun-job-type-failures-');
    const topology = new Topology(`t${randomBytes(4).toString('hex')}`);
    const schemas = new TestSchemas();
    const schema = freshSchemaName();
    const processes: WorkerProcess[] = [];
    let client: Client;
    let broker: Broker;

    before(async () => {
      // The module imports 'planrun' by name, installed beside it as a user's would be.
      mkdirSync(join(dir.path, 'node_modules'));
      symlinkSync(packageRoot, join(dir.path, 'node_modules', 'planrun'), 'dir');
      const jobsModule = join(dir.path, 'buggy-jobs.ts');
      writeFileSync(jobsModule, jobsSource);
      const keys = KeyStore.open(dir.path);
      const { key } = keys.create('acme');
      keys.close();
      const port = await freePort();
      const ledgerArgs = ledger === 'postgres' ? ['--ledger', `${fastTestUrl()}&schema=${schema}`] : [];
      processes.push(
        await startPlanrunProcess(
          [
            'orchestrator',
            '--amqp',
            rabbitMqUrl,
            '--data-dir',
            dir.path,
            '--port',
            String(port),
            '--prefix',
            topology.prefix,
            '--backoff',
            '100ms',
            ...ledgerArgs,
          ],
          'orchestrator ready',
        ),
      );
      processes.push(
        await startWorkerProcess([
          '--amqp',
          rabbitMqUrl,
          '--prefix',
          topology.prefix,
          '--jobs',
          jobsModule,
          '--slots',
          '1',
          '--heartbeat-interval',
          '300ms',
          '--output-dir',
          join(dir.path, 'outputs'),
          '--scratch-dir',
          join(dir.path, 'scratch'),
        ]),
      );
      client = new Client({ url: `http://127.0.0.1:${port}`, key });
    });

    after(async () => {
      for (const { child } of processes) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await Promise.all(processes.map((p) => p.exited));
      broker = await RabbitMqBroker.connect({ url: rabbitMqUrl });
      const types = ['sleep', 'checksum', 'transcode', 'thumbnail', 'buggy', 'deep'];
      for (const queue of [topology.controlQueue, topology.submitQueue, topology.deadQueue, ...types.map((type) => topology.workQueue(type))]) {
        await broker.deleteQueue(queue).catch(() => undefined);
      }
      for (const exchange of topology.exchanges) await broker.deleteExchange(exchange).catch(() => undefined);
      await broker.close();
      if (ledger === 'postgres') await schemas.drop(schema);
      await schemas.dropAll();
      dir.remove();
    });

    it('the worker holds back the type it lacks a capability for, and says so to the fleet', async () => {
      const worker = await waitFor('the worker in the fleet', async () => (await client.fleet()).workers[0]);
      assert.deepEqual(worker.heldBack, [{ type: 'thumbnail', missing: ['imagemagick'] }]);
      assert.ok(worker.jobTypes.includes('buggy') && !worker.jobTypes.includes('thumbnail'), worker.jobTypes.join(', '));
    });

    it('a job of that type fails at once, naming the capability missing', async () => {
      const submitted = await client.submit('thumbnail', { url: 'https://example.com/a.jpg' });
      assert.deepEqual([submitted.state, submitted.reason, submitted.error?.code], ['failed', 'unroutable', 'unroutable']);
      assert.equal(
        submitted.error?.message,
        'no worker of the fleet offers job type "thumbnail": the workers that have it lack capabilities it requires: missing "imagemagick"',
      );
    });

    it("a plain Error's stack is kept with the attempt, naming the .ts line, and GET /v1/jobs/:id shows it", async () => {
      const submitted = await client.submit('buggy', {}, { maxAttempts: 1 });
      const job = await client.wait(submitted.id, { timeoutMs: 20_000 });
      assert.equal(job.state, 'failed');
      const [attempt] = job.attempts;
      assert.deepEqual([attempt?.error?.class, attempt?.error?.code], ['transient', 'unclassified']);
      assert.match(attempt?.error?.message ?? '', /Cannot read properties of undefined \(reading 'width'\)/);
      assert.match(attempt?.error?.stack ?? '', /^TypeError: Cannot read properties of undefined[^\n]*\n\s+at widthOf \([^)]*buggy-jobs\.ts:6:\d+\)/);
    });

    it('a stack is kept to its bound', async () => {
      const submitted = await client.submit('deep', {}, { maxAttempts: 1 });
      const job = await client.wait(submitted.id, { timeoutMs: 20_000 });
      const stack = job.attempts[0]?.error?.stack ?? '';
      assert.equal(stack.length, MAX_ERROR_STACK_LENGTH);
      assert.match(stack, /^Error: m{1000}/);
      assert.equal(job.attempts[0]?.error?.message.length, 20_000);
    });
  });
}
