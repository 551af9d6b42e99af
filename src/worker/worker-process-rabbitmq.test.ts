/**
 * A worker as an operator runs it: `planrun worker` in its own process on RabbitMQ,
 * killed with SIGKILL, stopped with SIGTERM, or stopping itself on a Fatal error.
 */
import assert from 'node:assert/strict';
import { after, afterEach, before, describe, it } from 'node:test';
import type { Broker } from '../broker/broker.js';
import { RabbitMqBroker } from '../broker/rabbitmq.js';
import { Harness, probeJobsModule } from '../../test/testing/harness.js';
import { isAlive } from '../../test/testing/processes.js';
import { rabbitMqUrl } from '../../test/testing/services.js';
import { waitFor } from '../../test/testing/wait.js';
import { startWorkerProcess, type WorkerProcess } from '../../test/testing/worker-process.js';
import { fatalExitCode } from './exit-codes.js';

describe('planrun worker as a process, on RabbitMQ', () => {
  let broker: Broker;
  let harness: Harness;
  const processes: WorkerProcess[] = [];
  const extraBrokers: Broker[] = [];

  before(async () => {
    broker = await RabbitMqBroker.connect({ url: rabbitMqUrl, heartbeatSeconds: 2 });
  });
  after(async () => {
    await broker.close();
  });
  afterEach(async () => {
    for (const { child } of processes.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await harness?.close();
    await Promise.all(extraBrokers.splice(0).map((b) => b.close()));
  });

  async function workerProcess(extra: string[] = []): Promise<WorkerProcess> {
    const started = await startWorkerProcess([
      '--amqp',
      rabbitMqUrl,
      '--prefix',
      harness.topology.prefix,
      '--jobs',
      probeJobsModule,
      '--slots',
      '1',
      '--heartbeat-interval',
      '300ms',
      '--control-timeout',
      '1s',
      '--output-dir',
      harness.outputRoot,
      '--scratch-dir',
      `${harness.dir.path}/scratch-process`,
      ...extra,
    ]);
    processes.push(started);
    return started;
  }

  it('a worker killed with SIGKILL mid-job: its job process dies too, and the job runs again as attempt 2 elsewhere', async () => {
    harness = await new Harness({ broker, ledgerConfig: { leaseTtlMs: 1500, backoffBaseMs: 50 } }).start();
    const victim = await workerProcess();
    const { job } = await harness.orchestrator.submit({ tenant: 'acme', type: 'probe', input: { ms: 3000, runLog: harness.runLog } });
    const firstRun = await waitFor('attempt 1 to start', () => harness.runs(job.id)[0]);
    victim.child.kill('SIGKILL');
    await victim.exited;
    await waitFor('the orphaned job process to exit with its parent', async () => !(await isAlive(firstRun.pid)), 5000);

    const rescuer = await RabbitMqBroker.connect({ url: rabbitMqUrl, heartbeatSeconds: 2 });
    extraBrokers.push(rescuer);
    await harness.startWorker(rescuer);
    const result = await waitFor('the result message', () => harness.resultsFor(job.id)[0], 15_000);
    assert.equal(result.body.state, 'finished');
    assert.equal(result.body.attempt, 2);
    assert.deepEqual(
      harness.runs(job.id).map((r) => r.attempt),
      [1, 2],
    );
    const attempts = await harness.ledger.getAttempts(job.id);
    assert.deepEqual(
      attempts.map((a) => a.outcome),
      ['expired', 'finished'],
    );
    assert.equal(harness.resultsFor(job.id).length, 1);
  });

  it('SIGTERM lets the running job finish and settle, then the worker exits 0', async () => {
    harness = await new Harness({ broker }).start();
    const worker = await workerProcess(['--stop-grace', '10s']);
    const { job } = await harness.orchestrator.submit({ tenant: 'acme', type: 'probe', input: { ms: 800, runLog: harness.runLog } });
    await waitFor('the job to start', () => harness.runs(job.id)[0]);
    worker.child.kill('SIGTERM');
    const exit = await worker.exited;
    assert.deepEqual(exit, { code: 0, signal: null });
    const stored = await harness.ledger.getJob(job.id);
    assert.equal(stored?.state, 'finished');
    assert.equal(stored?.attempt, 1);
    await waitFor('the result message', () => harness.resultsFor(job.id)[0]);
  });

  it('SIGTERM past a short --stop-grace hands the running job back: attempt 2 is due at once, not a lease TTL later', async () => {
    harness = await new Harness({ broker, ledgerConfig: { leaseTtlMs: 60_000 } }).start();
    const worker = await workerProcess(['--stop-grace', '200ms']);
    const { job } = await harness.orchestrator.submit({ tenant: 'acme', type: 'probe', input: { ms: 60_000, runLog: harness.runLog } });
    await waitFor('the job to start', () => harness.runs(job.id)[0]);
    worker.child.kill('SIGTERM');
    assert.deepEqual(await worker.exited, { code: 0, signal: null });
    const stored = await harness.ledger.getJob(job.id);
    assert.deepEqual([stored?.state, stored?.attempt], ['queued', 2]);
    const [first] = await harness.ledger.getAttempts(job.id);
    assert.deepEqual([first?.outcome, first?.error?.code], ['released', 'worker_stopped']);
  });

  it('a second SIGTERM stops at once, handing the running job back, however long the stop grace', async () => {
    harness = await new Harness({ broker, ledgerConfig: { leaseTtlMs: 60_000 } }).start();
    const worker = await workerProcess(['--stop-grace', '60s']);
    const { job } = await harness.orchestrator.submit({ tenant: 'acme', type: 'probe', input: { ms: 60_000, runLog: harness.runLog } });
    await waitFor('the job to start', () => harness.runs(job.id)[0]);
    worker.child.kill('SIGTERM');
    await new Promise((resolve) => setTimeout(resolve, 300));
    const second = Date.now();
    worker.child.kill('SIGTERM');
    assert.deepEqual(await worker.exited, { code: 0, signal: null });
    assert.ok(Date.now() - second < 3_000, `exited ${Date.now() - second} ms after the second signal`);
    const stored = await harness.ledger.getJob(job.id);
    assert.deepEqual([stored?.state, stored?.attempt], ['queued', 2]);
  });

  it('a Fatal error stops the worker with a non-zero exit code, after it recorded the error and handed the job back', async () => {
    harness = await new Harness({ broker, ledgerConfig: { leaseTtlMs: 60_000 } }).start();
    const worker = await workerProcess();
    const { job } = await harness.orchestrator.submit({ tenant: 'acme', type: 'probe', input: { ms: 10, runLog: harness.runLog, fail: 'fatal' } });
    const exit = await worker.exited;
    assert.equal(exit.code, fatalExitCode);
    assert.match(worker.log(), /probe_fatal/);
    const stored = await harness.ledger.getJob(job.id);
    assert.deepEqual([stored?.state, stored?.attempt], ['queued', 2], 'handed back: attempt 2 is due now, not a lease TTL later');
    const [first] = await harness.ledger.getAttempts(job.id);
    assert.deepEqual([first?.outcome, first?.error?.class, first?.error?.code], ['released', 'fatal', 'probe_fatal']);
  });
});
