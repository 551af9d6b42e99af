/**
 * Seed 003's limiter story, as an operator would live it: a tenant limited to 3 running
 * jobs, its 3 workers killed with SIGKILL mid-job. The orphaned leases must not hold the
 * limit forever: the dispatcher sweeps before it counts, so the next jobs start once the
 * leases expire, within one sweep interval (the figure is printed; the assertion leaves a
 * loaded machine room).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, describe, it } from 'node:test';
import { RabbitMqBroker } from '../broker/rabbitmq.js';
import { Client } from '../client/client.js';
import { createKey } from '../../test/testing/keys.js';
import { freePort } from '../../test/testing/free-port.js';
import { probeJobsModule } from '../../test/testing/harness.js';
import { rabbitMqUrl } from '../../test/testing/services.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { waitFor } from '../../test/testing/wait.js';
import { cliPath, startPlanrunProcess, startWorkerProcess, type WorkerProcess } from '../../test/testing/worker-process.js';
import { Topology } from '../topology.js';

const leaseTtlMs = 2_000;
const sweepIntervalMs = 200;

describe('a tenant at its running limit whose workers are killed mid-job (seed 003)', () => {
  const dir = tempDir('planrun-limit-crash-');
  const topology = new Topology(`t${randomBytes(4).toString('hex')}`);
  const processes: WorkerProcess[] = [];

  after(async () => {
    for (const { child } of processes) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await Promise.all(processes.map((p) => p.exited));
    const broker = await RabbitMqBroker.connect({ url: rabbitMqUrl });
    for (const queue of [topology.controlQueue, topology.submitQueue, topology.deadQueue, topology.workQueue('probe')]) {
      await broker.deleteQueue(queue).catch(() => undefined);
    }
    for (const exchange of topology.exchanges) await broker.deleteExchange(exchange).catch(() => undefined);
    await broker.close();
    dir.remove();
  });

  it('does not deadlock: the next jobs start within the lease TTL and one sweep interval of the kill', async () => {
    const key = await createKey(dir.path, 'acme');
    const port = await freePort();
    const common = ['--amqp', rabbitMqUrl, '--prefix', topology.prefix];
    processes.push(
      await startPlanrunProcess(
        [
          'orchestrator',
          ...common,
          '--data-dir',
          dir.path,
          '--port',
          String(port),
          '--lease-ttl',
          `${leaseTtlMs}ms`,
          '--sweep-interval',
          `${sweepIntervalMs}ms`,
        ],
        'orchestrator ready',
      ),
    );
    const { stdout } = await promisify(execFile)(process.execPath, [cliPath, 'tenants', 'set', 'acme', '--max-running', '3', '--data-dir', dir.path]);
    assert.deepEqual((JSON.parse(stdout) as { limits: unknown }).limits, [{ tenant: 'acme', type: '', maxRunning: 3 }]);

    const worker = (slots: number) =>
      startWorkerProcess([
        ...common,
        '--jobs',
        probeJobsModule,
        '--slots',
        String(slots),
        '--heartbeat-interval',
        '300ms',
        '--output-dir',
        join(dir.path, 'outputs'),
        '--scratch-dir',
        join(dir.path, 'scratch'),
      ]);
    const doomed = [await worker(1), await worker(1), await worker(1)];
    processes.push(...doomed);
    const client = new Client({ url: `http://127.0.0.1:${port}`, key });
    const runLog = join(dir.path, 'runs.log');
    const long = await client.submitMany(Array.from({ length: 3 }, () => ({ type: 'probe', input: { ms: 600_000, steps: 600, runLog } })));
    await waitFor('the doomed workers to run the first three jobs', async () => (await client.list({ state: 'running' })).jobs.length === 3, 30_000);
    const next = await client.submitMany(Array.from({ length: 3 }, () => ({ type: 'probe', input: { ms: 50, runLog } })));

    // A spare worker with free slots: the limit, not the fleet, holds the next jobs back.
    processes.push(await worker(3));
    await waitFor('the spare worker in the fleet', async () => (await client.fleet()).workers.length === 4, 30_000);
    assert.equal((await client.get(next[0]!.id)).waitingFor, 'tenant_limit');
    assert.equal((await client.get(next[0]!.id)).state, 'queued');

    const killedAt = Date.now();
    for (const { child } of doomed) child.kill('SIGKILL');
    await Promise.all(doomed.map((p) => p.exited));

    for (const job of next) await waitFor(`job ${job.id} to finish on the spare`, async () => (await client.get(job.id)).state === 'finished', 60_000);
    const started = await Promise.all(next.map(async (job) => Date.parse((await client.get(job.id)).startedAt!)));
    const latest = Math.max(...started) - killedAt;
    console.log(`seed 003: the next jobs started ${latest} ms after the kill (lease TTL ${leaseTtlMs} ms, sweep interval ${sweepIntervalMs} ms)`);
    // TTL + one sweep interval, and as much again for a loaded machine: a deadlock never gets there.
    assert.ok(latest <= 2 * (leaseTtlMs + sweepIntervalMs), `the next jobs started ${latest} ms after the kill`);

    // The orphaned jobs were reaped (attempt 1 expired) and run again within the limit.
    for (const job of long) {
      const view = await client.get(job.id);
      assert.equal(view.attempts[0]?.outcome, 'expired', `job ${job.id}'s first attempt was reaped`);
    }
  });
});
