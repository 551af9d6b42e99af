/**
 * Any moment is a safe moment to kill -9 the orchestrator: restarted on the same data
 * dir, it loses nothing and announces nothing twice (a result message may be sent again
 * after a crash between the broker's confirm and the ledger's "sent" mark, but always
 * with the job's id and the same body, so there is one distinct answer per job).
 *
 * On the embedded broker the broker dies with the orchestrator, so this also shows that
 * its store keeps what it confirmed: the result messages waiting in an app's queue that
 * nobody consumed before the last kill are all there after the restart.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { isBrokerError, type Broker } from '../broker/broker.js';
import { SocketBroker } from '../broker/embedded-socket-client.js';
import { RabbitMqBroker } from '../broker/rabbitmq.js';
import { Client } from '../client/client.js';
import { freePort } from '../../test/testing/free-port.js';
import { createKey } from '../../test/testing/keys.js';
import { probeJobsModule } from '../../test/testing/harness.js';
import { rabbitMqUrl } from '../../test/testing/services.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { waitFor } from '../../test/testing/wait.js';
import { startPlanrunProcess, startWorkerProcess, type WorkerProcess } from '../../test/testing/worker-process.js';
import { Topology } from '../topology.js';

for (const kind of ['rabbitmq', 'embedded'] as const) {
  describe(`the orchestrator killed with SIGKILL mid-run (${kind === 'rabbitmq' ? 'RabbitMQ' : 'embedded broker'})`, () => {
    const dir = tempDir('planrun-orchestrator-kill-');
    const topology = new Topology(`t${randomBytes(4).toString('hex')}`);
    const socket = `${dir.path}/broker.sock`;
    const brokerArgs = kind === 'rabbitmq' ? ['--amqp', rabbitMqUrl] : ['--broker-socket', socket];
    const processes: WorkerProcess[] = [];
    const results: Array<{ id: string | undefined; body: string }> = [];
    /** Bound to the results too, and read only after the last kill. */
    const lateQueue = `${topology.prefix}.late-results`;
    let observer: Broker;

    const observe = async () => {
      observer =
        kind === 'rabbitmq'
          ? await RabbitMqBroker.connect({ url: rabbitMqUrl })
          : await SocketBroker.connect({ path: socket, retry: { initialMs: 50, maxMs: 200 } });
      await observer.declareTopicExchange(topology.resultsExchange);
      const queue = `${topology.prefix}.observed-results`;
      for (const name of [queue, lateQueue]) {
        await observer.declareQueue(name);
        await observer.bindQueue(name, topology.resultsExchange, '#');
      }
      await observer.consume(
        queue,
        (d) => {
          results.push({ id: d.messageId, body: d.body.toString() });
          d.ack();
        },
        { prefetch: 100 },
      );
    };

    // On RabbitMQ the app's queues exist before the orchestrator starts; the embedded broker exists only once it has.
    before(async () => {
      if (kind === 'rabbitmq') await observe();
    });

    after(async () => {
      for (const { child } of processes) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      if (kind === 'rabbitmq') {
        for (const queue of [
          `${topology.prefix}.observed-results`,
          lateQueue,
          topology.controlQueue,
          topology.submitQueue,
          topology.deadQueue,
          topology.workQueue('probe'),
        ]) {
          await observer.deleteQueue(queue).catch(() => undefined);
        }
        for (const exchange of topology.exchanges) await observer.deleteExchange(exchange).catch(() => undefined);
      }
      await observer?.close();
      dir.remove();
    });

    it('loses no job and announces each once, whether killed before the relay, mid-run or before settles are relayed', async () => {
      const port = await freePort();
      const key = await createKey(dir.path, 'acme');
      const orchestratorArgs = [
        'orchestrator',
        ...brokerArgs,
        '--data-dir',
        dir.path,
        '--port',
        String(port),
        '--prefix',
        topology.prefix,
        '--lease-ttl',
        '2s',
        '--sweep-interval',
        '200ms',
        '--backoff',
        '200ms',
      ];
      const startOrchestrator = async () => {
        const started = await startPlanrunProcess(orchestratorArgs, 'orchestrator ready');
        processes.push(started);
        return started;
      };
      let orchestrator = await startOrchestrator();
      if (kind === 'embedded') await observe();
      processes.push(
        await startWorkerProcess([
          ...brokerArgs,
          '--prefix',
          topology.prefix,
          '--jobs',
          probeJobsModule,
          '--slots',
          '3',
          '--heartbeat-interval',
          '300ms',
          '--control-timeout',
          '1s',
          '--output-dir',
          `${dir.path}/outputs`,
          '--scratch-dir',
          `${dir.path}/scratch`,
        ]),
      );
      const client = new Client({ url: `http://127.0.0.1:${port}`, key });
      const runLog = `${dir.path}/runs.log`;
      const submissions = Array.from({ length: 12 }, (_, i) => ({ type: 'probe', input: { ms: 300 + 100 * (i % 4), runLog }, idempotencyKey: `job-${i}` }));
      const submitted = await client.submitMany(submissions);
      // Three kills at different moments: right after the submissions, while jobs run, and again later.
      for (const pause of [0, 400, 700]) {
        await new Promise((resolve) => setTimeout(resolve, pause));
        orchestrator.child.kill('SIGKILL');
        await orchestrator.exited;
        orchestrator = await startOrchestrator();
      }
      const finals = await waitFor(
        'every job to end',
        async () => {
          const jobs = await Promise.all(submitted.map((job) => client.get(job.id)));
          return jobs.every((job) => job.state === 'finished' || job.state === 'failed') ? jobs : undefined;
        },
        60_000,
      );
      assert.deepEqual(
        finals.map((job) => job.state),
        submitted.map(() => 'finished'),
      );
      await waitFor('a result message for every job', () => submitted.every((job) => results.some((r) => r.id === job.id)), 20_000);
      for (const job of submitted) {
        const bodies = new Set(results.filter((r) => r.id === job.id).map((r) => r.body));
        assert.equal(bodies.size, 1, `job ${job.id} was announced with ${bodies.size} different answers`);
      }
      assert.equal(new Set(results.map((r) => r.id)).size, submitted.length, 'no result message for a job that does not exist');
      // A resubmission (the same submissions) after all this still names the same jobs.
      const again = await client.submitMany(submissions);
      assert.deepEqual(
        again.map((job) => job.id),
        submitted.map((job) => job.id),
      );

      // One more kill, with every answer waiting unread in the late queue: they are all still there.
      orchestrator.child.kill('SIGKILL');
      await orchestrator.exited;
      orchestrator = await startOrchestrator();
      const late = new Map<string, Set<string>>();
      // On the embedded broker the app's connection died with the broker: it may still be on its way back.
      await waitFor('the app consuming the late queue', async () => {
        try {
          return await observer.consume(
            lateQueue,
            (d) => {
              late.set(d.messageId!, (late.get(d.messageId!) ?? new Set()).add(d.body.toString()));
              d.ack();
            },
            { prefetch: 100 },
          );
        } catch (error) {
          if (isBrokerError(error, 'disconnected')) return undefined;
          throw error;
        }
      });
      await waitFor('the unread answers after the last kill', () => submitted.every((job) => late.has(job.id)), 20_000);
      for (const job of submitted) assert.equal(late.get(job.id)!.size, 1, `job ${job.id}: one distinct answer in the late queue`);
    });
  });
}
