/**
 * Any moment is a safe moment to kill -9 the orchestrator: restarted on the same data
 * dir, it loses nothing and announces nothing twice (a result message may be sent again
 * after a crash between the broker's confirm and the ledger's "sent" mark, but always
 * with the job's id and the same body, so there is one distinct answer per job).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { Broker } from '../broker/broker.js';
import { RabbitMqBroker } from '../broker/rabbitmq.js';
import { Client } from '../client/client.js';
import { KeyStore } from '../keys/key-store.js';
import { freePort } from '../testing/free-port.js';
import { probeJobsModule } from '../testing/harness.js';
import { rabbitMqUrl } from '../testing/services.js';
import { tempDir } from '../testing/temp-dir.js';
import { waitFor } from '../testing/wait.js';
import { startPlanrunProcess, startWorkerProcess, type WorkerProcess } from '../testing/worker-process.js';
import { Topology } from '../topology.js';

describe('the orchestrator killed with SIGKILL mid-run (RabbitMQ)', () => {
  const dir = tempDir('planrun-orchestrator-kill-');
  const topology = new Topology(`t${randomBytes(4).toString('hex')}`);
  const processes: WorkerProcess[] = [];
  const results: Array<{ id: string | undefined; body: string }> = [];
  let observer: Broker;

  before(async () => {
    observer = await RabbitMqBroker.connect({ url: rabbitMqUrl });
    await observer.declareTopicExchange(topology.resultsExchange);
    const queue = `${topology.prefix}.observed-results`;
    await observer.declareQueue(queue);
    await observer.bindQueue(queue, topology.resultsExchange, '#');
    await observer.consume(queue, (d) => {
      results.push({ id: d.messageId, body: d.body.toString() });
      d.ack();
    }, { prefetch: 100 });
  });

  after(async () => {
    for (const { child } of processes) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    for (const queue of [`${topology.prefix}.observed-results`, topology.controlQueue, topology.submitQueue, topology.deadQueue, topology.workQueue('probe')]) {
      await observer.deleteQueue(queue).catch(() => undefined);
    }
    await observer.deleteExchange(topology.resultsExchange).catch(() => undefined);
    await observer.close();
    dir.remove();
  });

  it('loses no job and announces each once, whether killed before the relay, mid-run or before settles are relayed', async () => {
    const port = await freePort();
    const keys = KeyStore.open(dir.path);
    const { key } = keys.create('acme');
    keys.close();
    const orchestratorArgs = [
      'orchestrator', '--amqp', rabbitMqUrl, '--data-dir', dir.path, '--port', String(port), '--prefix', topology.prefix,
      '--lease-ttl', '2s', '--sweep-interval', '200ms', '--backoff', '200ms',
    ];
    const startOrchestrator = async () => {
      const started = await startPlanrunProcess(orchestratorArgs, 'orchestrator ready');
      processes.push(started);
      return started;
    };
    let orchestrator = await startOrchestrator();
    processes.push(
      await startWorkerProcess(['--amqp', rabbitMqUrl, '--prefix', topology.prefix, '--jobs', probeJobsModule, '--slots', '3',
        '--heartbeat-interval', '300ms', '--control-timeout', '1s', '--output-dir', `${dir.path}/outputs`, '--scratch-dir', `${dir.path}/scratch`]),
    );
    const client = new Client({ url: `http://127.0.0.1:${port}`, key });
    const runLog = `${dir.path}/runs.log`;
    const submitted = await client.submitMany(
      Array.from({ length: 12 }, (_, i) => ({ type: 'probe', input: { ms: 300 + 100 * (i % 4), runLog }, idempotencyKey: `job-${i}` })),
    );
    // Three kills at different moments: right after the submissions, while jobs run, and again later.
    for (const pause of [0, 400, 700]) {
      await new Promise((resolve) => setTimeout(resolve, pause));
      orchestrator.child.kill('SIGKILL');
      await orchestrator.exited;
      orchestrator = await startOrchestrator();
    }
    const finals = await waitFor('every job to end', async () => {
      const jobs = await Promise.all(submitted.map((job) => client.get(job.id)));
      return jobs.every((job) => job.state === 'finished' || job.state === 'failed') ? jobs : undefined;
    }, 60_000);
    assert.deepEqual(finals.map((job) => job.state), submitted.map(() => 'finished'));
    await waitFor('a result message for every job', () => submitted.every((job) => results.some((r) => r.id === job.id)), 20_000);
    for (const job of submitted) {
      const bodies = new Set(results.filter((r) => r.id === job.id).map((r) => r.body));
      assert.equal(bodies.size, 1, `job ${job.id} was announced with ${bodies.size} different answers`);
    }
    assert.equal(new Set(results.map((r) => r.id)).size, submitted.length, 'no result message for a job that does not exist');
    // A resubmission after all this still names the same jobs.
    const again = await client.submitMany(submitted.map((_, i) => ({ type: 'probe', input: {}, idempotencyKey: `job-${i}` })));
    assert.deepEqual(again.map((job) => job.id), submitted.map((job) => job.id));
  });
});
