/**
 * Issue 12: the fleet lives in the ledger. Two orchestrators on one PostgreSQL ledger and
 * one broker (which hands control requests to each in turn): a worker first heard by A is
 * known to B, whose routing accepts its job types and refuses others; its heartbeats,
 * answered by both, keep renewing its lease (the same worker, by its proof, on both); and
 * both show the same fleet. And an orchestrator that shares only the ledger (a broker of
 * its own, so no heartbeat ever reaches it) knows the worker and routes by it.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { EmbeddedBroker } from '../broker/embedded.js';
import { openPostgresLedger } from '../ledger/postgres/postgres-ledger.js';
import { fastTestUrl, TestSchemas } from '../../test/ledger/postgres/testing.js';
import { startEmbeddedApi } from '../../test/api/fixture.js';
import { waitFor } from '../../test/testing/wait.js';

describe('the fleet shared through a PostgreSQL ledger (issue 12)', () => {
  const schemas = new TestSchemas();
  after(() => schemas.dropAll());

  it('a worker heard by A routes on B, and heartbeats through either renew its lease', async () => {
    const schema = schemas.reserve();
    const api = await startEmbeddedApi({
      openLedger: (config) => openPostgresLedger({ connectionString: fastTestUrl(), schema, config, poolSize: 4 }),
    });
    try {
      const a = api.harness.orchestrator;
      const worker = await api.harness.startWorker(api.connect(), { slots: 1 });
      await waitFor('the worker in A', () => a.fleet.list().length === 1);
      // B starts once the worker is known: until a heartbeat reaches it, it knows the worker only through the ledger.
      const [, b] = await api.harness.startOrchestrator(api.connect());
      await waitFor('the worker in B', () => b.fleet.list().some((m) => m.worker === worker.worker.id));

      assert.equal((await b.submit({ tenant: 'acme', type: 'nobody-offers-this', input: {} })).job.failureReason, 'unroutable');
      // A job that outlives its first lease (TTL 2 s): its heartbeats, answered by A and B in turn, must renew it.
      const { job } = await b.submit({ tenant: 'acme', type: 'probe', input: { ms: 3000, steps: 3, runLog: api.harness.runLog } });
      assert.equal(job.state, 'queued');
      await waitFor('the job to finish', async () => (await a.ledger.getJob(job.id))?.state === 'finished', 15_000);
      assert.equal((await a.ledger.getJob(job.id))?.attempt, 1, 'one attempt: its lease never ran out');
      assert.ok(worker.events.filter((e) => e.type === 'heartbeat').length >= 4);
      assert.ok(!worker.events.some((e) => e.type === 'fatal'), 'no heartbeat was refused');

      await waitFor('the same fleet on A and B', () => {
        const [onA, onB] = [a.fleet.list(), b.fleet.list()];
        return onA.length === 1 && onB.length === 1 && onA[0]!.lastHeartbeat === onB[0]!.lastHeartbeat;
      });
      assert.deepEqual(b.fleet.list(), a.fleet.list());
    } finally {
      await api.close();
    }
  });

  it('B, on a broker of its own, never hears the worker: it knows it from the ledger alone, and routes by it', async () => {
    const schema = schemas.reserve();
    const api = await startEmbeddedApi({
      openLedger: (config) => openPostgresLedger({ connectionString: fastTestUrl(), schema, config, poolSize: 4 }),
    });
    // No control request of the worker can reach B: B shares only the ledger with A.
    const elsewhere = new EmbeddedBroker();
    try {
      const worker = await api.harness.startWorker(api.connect(), { slots: 1 });
      const [, b] = await api.harness.startOrchestrator(elsewhere.connect());
      await waitFor('the worker in B, read from the ledger', () => b.fleet.list().some((m) => m.worker === worker.worker.id));
      assert.deepEqual(
        b.fleet.list().map((m) => [m.worker, m.jobTypes.includes('probe'), m.slots]),
        [[worker.worker.id, true, 1]],
      );
      assert.equal((await b.submit({ tenant: 'acme', type: 'probe', input: {} })).job.state, 'queued', 'routable on B');
      const refused = await b.submit({ tenant: 'acme', type: 'nobody-offers-this', input: {} });
      assert.equal(refused.job.failureReason, 'unroutable');
    } finally {
      await api.close();
      await elsewhere.close();
    }
  });
});
