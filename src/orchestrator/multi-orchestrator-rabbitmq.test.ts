/**
 * Issue 12: three orchestrators, each with its own PostgreSQL pool, on one ledger and one
 * RabbitMQ, serving the same topology at once. Jobs submitted through all three and run by
 * one worker (whose control requests any of them answers) all finish, every result message
 * arrives, and the relays, which claim outbox rows, publish each row about once: the
 * figure (copies per row) is printed, and docs/high-availability.md quotes it.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Broker } from '../broker/broker.js';
import type { SubmitParams } from '../ledger/ledger.js';
import { openPostgresLedger } from '../ledger/postgres/postgres-ledger.js';
import { fastTestUrl, TestSchemas } from '../../test/ledger/postgres/testing.js';
import { Harness } from '../../test/testing/harness.js';
import { rabbitMqConnections } from '../../test/testing/rabbitmq-connections.js';
import { waitFor } from '../../test/testing/wait.js';

/** `broker`, counting the messages it published and the broker confirmed. */
function countingPublishes(broker: Broker, counter: { published: number }): Broker {
  return new Proxy(broker, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== 'function') return value;
      if (property !== 'publish' && property !== 'sendToQueue') return value.bind(target);
      return async (...args: unknown[]) => {
        await (value as (...a: unknown[]) => Promise<void>).apply(target, args);
        counter.published++;
      };
    },
  });
}

describe('three orchestrators on one PostgreSQL ledger (issue 12)', () => {
  const schemas = new TestSchemas();
  let connections: Awaited<ReturnType<typeof rabbitMqConnections>>;
  before(async () => {
    connections = await rabbitMqConnections();
  });
  after(async () => {
    await connections.close();
    await schemas.dropAll();
  });

  it('publishes every outbox row, about once, and every result arrives', async () => {
    const schema = schemas.reserve();
    const counter = { published: 0 };
    const harness = new Harness({
      broker: countingPublishes(await connections.connect(), counter),
      openLedger: (config) => openPostgresLedger({ connectionString: fastTestUrl(), schema, config, poolSize: 4 }),
      // Small batches, so that the three relays contend for the same rows often.
      relay: { batchSize: 20 },
    });
    await harness.start();
    try {
      const orchestrators = [harness.orchestrator];
      for (let i = 0; i < 2; i++) orchestrators.push((await harness.startOrchestrator(countingPublishes(await connections.connect(), counter)))[1]);
      await harness.startWorker(await connections.connect(), { slots: 4 });

      const jobIds: string[] = [];
      const jobs = 300;
      for (let chunk = 0; chunk < jobs / 20; chunk++) {
        const params: SubmitParams[] = Array.from({ length: 20 }, () => ({
          tenant: 'acme',
          type: 'probe',
          input: { ms: 0, steps: 1, runLog: harness.runLog },
        }));
        const results = await orchestrators[chunk % orchestrators.length]!.submitMany(params);
        jobIds.push(...results.map(({ job }) => job.id));
      }
      await waitFor('every result message', () => jobIds.every((id) => harness.resultsFor(id).length >= 1), 120_000);
      for (const id of jobIds) {
        const results = harness.resultsFor(id);
        assert.equal(new Set(results.map((r) => r.messageId)).size, 1, `one result id for ${id}`);
        assert.equal(results[0]?.body.state, 'finished');
      }
      await waitFor('an empty outbox', async () => (await harness.ledger.outboxStats()).unsent === 0);
      const rows = Number((await schemas.admin.query<{ n: string }>(`SELECT COUNT(*) AS n FROM ${schema}.outbox WHERE set_aside_reason IS NULL`)).rows[0]!.n);
      const copies = counter.published / rows;
      console.log(`# 3 orchestrators, ${jobs} jobs: ${rows} outbox rows, ${counter.published} published, ${copies.toFixed(3)} copies per row`);
      assert.ok(counter.published >= rows, 'every row was published');
      // Relays that did not claim would publish most rows up to three times.
      assert.ok(copies < 1.5, `copies per row ${copies}`);
    } finally {
      await harness.close();
    }
  });
});
