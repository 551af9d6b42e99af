/**
 * planrun on a RabbitMQ cluster of the test's own (three nodes on this machine, one
 * Erlang cookie; never the shared broker on 5672): quorum queues, a URL list that
 * connects to the first live node, and SIGKILL of a node under a stream of confirmed
 * submissions, with an orchestrator and a worker as processes. The cluster is stopped
 * when the suite ends, also when it fails.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { RabbitCluster } from '../../tools/chaos/rabbit-cluster.js';
import { freePort } from '../../test/testing/free-port.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { waitFor } from '../../test/testing/wait.js';
import { startPlanrunProcess, startWorkerProcess, type WorkerProcess } from '../../test/testing/worker-process.js';
import { Client } from '../client/client.js';
import { createKey } from '../../test/testing/keys.js';
import { Topology } from '../topology.js';
import { isBrokerError, type BrokerEvent } from './broker.js';
import { RabbitMqBroker, type RabbitMqOptions } from './rabbitmq.js';

const fast: Omit<RabbitMqOptions, 'url'> = { heartbeatSeconds: 1, connectTimeoutMs: 1000, retry: { initialMs: 50, maxMs: 500 } };

describe('planrun on a 3-node RabbitMQ cluster with quorum queues', { timeout: 15 * 60_000 }, () => {
  const dir = tempDir('planrun-cluster-');
  let cluster: RabbitCluster;
  const opened: RabbitMqBroker[] = [];

  async function connect(url: string, options: Partial<RabbitMqOptions> = {}): Promise<RabbitMqBroker> {
    const broker = await RabbitMqBroker.connect({ url, ...fast, ...options });
    opened.push(broker);
    return broker;
  }

  /** The nodes' URLs, the one at `first` listed first. */
  function urlsFrom(first: number): string {
    const nodes = cluster.nodes.map((node) => node.url);
    return [...nodes.slice(first), ...nodes.slice(0, first)].join(',');
  }

  before(async () => {
    cluster = await RabbitCluster.start({ dir: join(dir.path, 'rabbit') });
  });

  after(async () => {
    await Promise.all(opened.map((broker) => broker.close().catch(() => undefined)));
    await cluster?.stop();
    dir.remove();
  });

  it('connects to the first node of the list that answers', async () => {
    const deadPort = await freePort();
    const broker = await connect(`amqp://guest:guest@127.0.0.1:${deadPort},127.0.0.1:${cluster.nodes[1]!.port}`);
    const queue = `probe-${randomUUID()}`;
    await broker.declareQueue(queue);
    await broker.deleteQueue(queue);
    await assert.rejects(
      connect(`amqp://guest:secret@127.0.0.1:${deadPort},127.0.0.1:${await freePort()}`),
      (error: unknown) =>
        isBrokerError(error, 'disconnected') &&
        /cannot connect to RabbitMQ at .*:\*\*\*@/.test((error as Error).message) &&
        !/secret/.test((error as Error).message),
    );
  });

  it('declares quorum queues, and refuses a queue of the other type with what to do', async () => {
    const quorum = await connect(cluster.url, { queueType: 'quorum' });
    const classic = await connect(cluster.url);
    const [q, c] = [`q-${randomUUID()}`, `c-${randomUUID()}`];
    await quorum.declareQueue(q);
    await classic.declareQueue(c);
    const types = await cluster.nodes[0]!.ctl(['list_queues', '-q', '--formatter', 'json', 'name', 'type'], 30_000);
    const byName = new Map((JSON.parse(types) as Array<{ name: string; type: string }>).map((row) => [row.name, row.type]));
    assert.deepEqual([byName.get(q), byName.get(c)], ['quorum', 'classic']);
    await assert.rejects(classic.declareQueue(q), (error: Error) =>
      new RegExp(`queue ${q} exists as a quorum queue, but this process declares it classic.*--queue-type quorum.*delete_queue ${q}`).test(error.message),
    );
    await assert.rejects(quorum.declareQueue(c), (error: Error) =>
      new RegExp(`queue ${c} exists as a classic queue, but this process declares it quorum.*--queue-type classic`).test(error.message),
    );
    await quorum.deleteQueue(q);
    await classic.deleteQueue(c);
  });

  it('loses no confirmed submission when a node is killed, and the processes carry on on a live node', { timeout: 10 * 60_000 }, async () => {
    const topology = new Topology(`t${randomUUID().slice(0, 8)}`);
    const key = await createKey(dir.path, 'acme');
    const port = await freePort();
    // Every process lists node 1 first, so they are all on the node that dies.
    const amqp = urlsFrom(0);
    const processes: WorkerProcess[] = [];
    try {
      processes.push(
        await startPlanrunProcess(
          [
            'orchestrator',
            '--amqp',
            amqp,
            '--queue-type',
            'quorum',
            '--data-dir',
            dir.path,
            '--port',
            String(port),
            '--prefix',
            topology.prefix,
            '--backoff',
            '100ms',
          ],
          'orchestrator ready',
        ),
      );
      processes.push(
        await startWorkerProcess([
          '--amqp',
          amqp,
          '--queue-type',
          'quorum',
          '--prefix',
          topology.prefix,
          '--heartbeat-interval',
          '300ms',
          '--slots',
          '4',
          '--output-dir',
          join(dir.path, 'outputs'),
          '--scratch-dir',
          join(dir.path, 'scratch'),
        ]),
      );
      const client = new Client({ url: `http://127.0.0.1:${port}`, key });
      // The app: confirmed publishes to the submit queue, each retried with the same
      // message id (the idempotency key) until confirmed, as an app does.
      const app = await connect(amqp);
      const events: BrokerEvent['type'][] = [];
      app.onEvent((event) => events.push(event.type));
      const confirmed = new Set<string>();
      let refused = 0;
      const failures = new Map<string, number>();
      let submitDeadline = Date.now() + 120_000;
      const submitOne = async () => {
        const idempotencyKey = randomUUID();
        const body = Buffer.from(JSON.stringify({ tenant: 'acme', type: 'sleep', input: { ms: 20 } }));
        for (;;) {
          try {
            await withDeadline(app.sendToQueue(topology.submitQueue, body, { messageId: idempotencyKey }), 60_000, `the publish of ${idempotencyKey}`);
            confirmed.add(idempotencyKey);
            return;
          } catch (error) {
            // In flight when the node died: not confirmed (the connection went) or refused
            // (the queue's leader went); either way sent again under the same key.
            if (!isBrokerError(error, 'disconnected') && !isBrokerError(error, 'publish_nacked')) throw error;
            refused++;
            const why = `${error.code}: ${error.message}`;
            failures.set(why, (failures.get(why) ?? 0) + 1);
            if (Date.now() > submitDeadline) throw new Error(`publishes still failing after the kill: ${JSON.stringify([...failures])}`);
            await delay(100);
          }
        }
      };
      // Four publishes in flight at a time, so some are unconfirmed when the node dies.
      const submitUntil = (count: number) =>
        Promise.all(
          Array.from({ length: 4 }, async () => {
            while (confirmed.size < count) await submitOne();
          }),
        );
      await submitUntil(40);
      await waitFor('a job finished before the kill', async () => (await client.list({ state: 'finished', limit: 1 })).jobs.length > 0, 60_000);
      await cluster.nodes[0]!.killHard();
      submitDeadline = Date.now() + 120_000;
      await submitUntil(120);
      assert.ok(events.includes('connection_lost') && events.includes('connection_restored'), `the app reconnected to a live node (${events.join(', ')})`);

      const finished = await waitFor(
        'every confirmed submission finished',
        async () => {
          const keysSeen = new Set<string>();
          let cursor: string | undefined;
          do {
            const page = await client.list({ state: 'finished', limit: 500, ...(cursor ? { cursor } : {}) });
            for (const job of page.jobs) if (job.idempotencyKey) keysSeen.add(job.idempotencyKey);
            cursor = page.nextCursor ?? undefined;
          } while (cursor);
          return [...confirmed].every((k) => keysSeen.has(k)) ? keysSeen : undefined;
        },
        180_000,
        500,
      );
      const lost = [...confirmed].filter((k) => !finished.has(k));
      assert.equal(lost.length, 0, 'confirmed submissions lost');
      console.log(
        `cluster: ${confirmed.size} confirmed submissions, ${refused} publishes unconfirmed or refused around the kill (sent again), 0 lost; all finished`,
      );
      assert.ok(
        processes.every((p) => p.child.exitCode === null),
        'the orchestrator and the worker lived through the loss of their node',
      );
    } catch (error) {
      // What the processes said is the only way to see why after the fact.
      const failedLogs = mkdtempSync(join(tmpdir(), 'planrun-cluster-logs-'));
      for (const [index, process] of processes.entries()) writeFileSync(join(failedLogs, `process-${index}.log`), process.log());
      throw new Error(`${(error as Error).message} (the processes' logs are in ${failedLogs})`, { cause: error });
    } finally {
      for (const { child } of processes) if (child.exitCode === null) child.kill('SIGKILL');
      await Promise.all(processes.map((p) => p.exited));
    }
  });
});

/** `promise`, or a failure naming `what` once `ms` have passed: a publish must be confirmed or refused, never left hanging. */
async function withDeadline<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>(
    (_, reject) => (timer = setTimeout(() => reject(new Error(`${what} was neither confirmed nor refused within ${ms} ms`)), ms)),
  );
  try {
    return await Promise.race([promise, deadline]);
  } finally {
    clearTimeout(timer);
  }
}
