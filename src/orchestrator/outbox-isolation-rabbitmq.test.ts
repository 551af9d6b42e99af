/**
 * Issue 18 on the real RabbitMQ, findings 3 and 5:
 * - rows the relay can never publish (a type of 250 characters makes a queue name and a
 *   routing key over AMQP's 255 bytes; `sleep\n`; a tenant with dots), injected straight
 *   into the ledger past the relay's batch of 200 as rows written before the submission
 *   rules held would be, once stalled the outbox for everyone: now each is set aside,
 *   its job fails as undeliverable, a metric counts it, and new jobs still go out;
 * - jobs of types nobody offers, with a worker present, once left a durable queue
 *   `planrun.work.orphanN` each: now no work message is published and no queue made.
 */
import assert from 'node:assert/strict';
import amqp from 'amqplib';
import { after, before, describe, it } from 'node:test';
import type { LedgerConfig, SubmitParams } from '../ledger/ledger.js';
import { Harness } from '../../test/testing/harness.js';
import { rabbitMqConnections } from '../../test/testing/rabbitmq-connections.js';
import { rabbitMqUrl } from '../../test/testing/services.js';
import { waitFor } from '../../test/testing/wait.js';

/** Whether RabbitMQ has a queue of that name (a passive declare on a channel of its own). */
async function queueExists(connection: amqp.ChannelModel, queue: string): Promise<boolean> {
  const channel = await connection.createChannel();
  channel.on('error', () => undefined);
  try {
    await channel.checkQueue(queue);
    await channel.close();
    return true;
  } catch {
    return false;
  }
}

describe('the outbox relay on RabbitMQ (issue 18)', () => {
  let connections: Awaited<ReturnType<typeof rabbitMqConnections>>;
  let harness: Harness;
  let rabbit: amqp.ChannelModel;
  before(async () => {
    connections = await rabbitMqConnections();
    rabbit = await amqp.connect(rabbitMqUrl);
  });
  after(async () => {
    await rabbit.close();
    await connections.close();
  });

  async function withHarness(body: () => Promise<void>, ledgerConfig: Partial<LedgerConfig> = {}): Promise<void> {
    harness = await new Harness({ broker: await connections.connect(), ledgerConfig }).start();
    try {
      await body();
    } finally {
      await harness.close();
    }
  }

  // With fifo dispatch, whose work rows are written at submit: under fair dispatch a job of a
  // type no worker offers has no work row to set aside, it waits for such a worker.
  it('sets aside rows it can never publish, fails their jobs as undeliverable, counts them, and new jobs still go out', () =>
    withHarness(
      async () => {
        const unpublishable: SubmitParams[] = [
          ...Array.from({ length: 200 }, () => ({ tenant: 't1', type: 'y'.repeat(250), input: {} })),
          ...Array.from({ length: 20 }, () => ({ tenant: 't1', type: 'sleep\n', input: {} })),
          ...Array.from({ length: 20 }, () => ({ tenant: 't2.checksum.finished', type: 'probe', input: {} })),
        ];
        const bad = (await harness.ledger.submitMany(unpublishable)).map(({ job }) => job.id);
        await harness.startWorker(await connections.connect());
        const good: string[] = [];
        for (let i = 0; i < 20; i++) {
          good.push((await harness.orchestrator.submit({ tenant: 'acme', type: 'probe', input: { ms: 10, steps: 1, runLog: harness.runLog } })).job.id);
        }
        await waitFor('the new jobs to finish and announce it', () => good.every((id) => harness.resultsFor(id).length === 1), 30_000);
        for (const id of good) assert.equal((await harness.ledger.getJob(id))?.state, 'finished');

        const failed = await Promise.all(bad.map((id) => harness.ledger.getJob(id)));
        for (const job of failed) {
          assert.equal(job?.state, 'failed', job?.type);
          assert.equal(job?.failureReason, 'permanent');
          assert.equal(job?.error?.code, 'undeliverable');
        }
        assert.match(failed[0]!.error!.message, /job type "y{80}\.\.\." breaks the name rule/);
        assert.match(failed[220]!.error!.message, /tenant name "t2\.checksum\.finished" must start with a letter/);
        // Their failure messages cannot be published either: set aside too, never retried.
        await waitFor('an empty outbox', async () => (await harness.ledger.outboxStats()).unsent === 0);
        const metrics = await harness.orchestrator.metrics.registry.getSingleMetricAsString('planrun_outbox_set_aside_total');
        assert.match(metrics, /planrun_outbox_set_aside_total\{kind="work"\} 240/);
        assert.match(metrics, /planrun_outbox_set_aside_total\{kind="result"\} 240/);
        assert.equal(await queueExists(rabbit, harness.topology.workQueue('sleep\n')), false);
      },
      { dispatch: 'fifo' },
    ));

  it('publishes no work message and declares no queue for jobs of types nobody offers', () =>
    withHarness(async () => {
      await harness.startWorker(await connections.connect());
      await waitFor('the worker in the fleet', () => harness.orchestrator.fleet.list().length > 0);
      const orphans: string[] = [];
      for (let n = 1; n <= 20; n++) {
        const { job } = await harness.orchestrator.submit({ tenant: 'acme', type: `orphan${n}`, input: {} });
        assert.equal(job.state, 'failed');
        assert.equal(job.failureReason, 'unroutable');
        orphans.push(job.id);
      }
      // A job the routing never saw (recorded straight in the ledger, as in a race with
      // the fleet changing) gets no queue declared for it either.
      const unseen = (await harness.ledger.submit({ tenant: 'acme', type: 'orphan21', input: {} })).job;
      await waitFor('the failure messages of the orphans', () => orphans.every((id) => harness.resultsFor(id).length === 1));
      await waitFor('an empty outbox', async () => (await harness.ledger.outboxStats()).unsent === 0);
      for (let n = 1; n <= 21; n++) {
        assert.equal(await queueExists(rabbit, harness.topology.workQueue(`orphan${n}`)), false, `no queue for orphan${n}`);
      }
      assert.equal((await harness.ledger.getJob(unseen.id))?.state, 'queued', 'it waits in the ledger for a worker of its type');
      assert.ok(await queueExists(rabbit, harness.topology.workQueue('probe')), 'the offered type has its queue');
    }));
});
