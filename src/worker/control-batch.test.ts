/**
 * The requests a worker makes at one moment travel as one batch message, and the
 * orchestrator answers each of them on its own: one broker round trip, N decisions.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { isBrokerError, type Broker } from '../broker/broker.js';
import { EmbeddedBroker } from '../broker/embedded.js';
import { silentLogger } from '../core/logger.js';
import type { Ledger } from '../ledger/ledger.js';
import { openSqliteLedger } from '../ledger/sqlite/sqlite-ledger.js';
import { Orchestrator } from '../orchestrator/orchestrator.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { waitFor } from '../../test/testing/wait.js';
import { Topology } from '../topology.js';
import { ControlClient, ControlError } from './control-client.js';

describe('control requests in batches', () => {
  const dir = tempDir();
  const topology = new Topology('batch');
  const core = new EmbeddedBroker();
  let ledger: Ledger;
  let orchestrator: Orchestrator;
  let broker: Broker;
  /** Every control message the client sent, as the broker saw it. */
  const sent: Array<{ op: string; requests?: unknown[] }> = [];
  let client: ControlClient;

  before(async () => {
    ledger = await openSqliteLedger({ path: join(dir.path, 'ledger.db'), config: { leaseTtlMs: 60_000 } });
    orchestrator = new Orchestrator({ ledger, broker: core.connect(), topology, logger: silentLogger(), leaseTtlMs: 60_000 });
    await orchestrator.start();
    broker = core.connect();
    const recording = {
      request: (queue: string, body: Buffer, options: Parameters<Broker['request']>[2]) => {
        sent.push(JSON.parse(body.toString()) as { op: string });
        return broker.request(queue, body, options);
      },
    } as Broker;
    client = new ControlClient(recording, topology, 2000);
  });

  after(async () => {
    await orchestrator.stop();
    await core.close();
    await ledger.close();
    dir.remove();
  });

  const submit = async (tenant = 'acme') => (await ledger.submit({ tenant, type: 'probe', input: {} })).job;

  it('sends the requests of one moment as one message, and each gets its own answer', async () => {
    const jobs = [await submit(), await submit(), await submit('globex')];
    sent.length = 0;
    const leases = await Promise.all([
      ...jobs.map((job) => client.lease({ jobId: job.id, attempt: 1, tenant: job.tenant, worker: 'w1' })),
      client.lease({ jobId: jobs[0]!.id, attempt: 1, tenant: 'initech', worker: 'w1' }),
    ]);
    assert.deepEqual(
      sent.map((m) => [m.op, m.requests?.length]),
      [['batch', 4]],
    );
    assert.deepEqual(
      leases.map((l) => (l.granted ? 'granted' : l.reason)),
      ['granted', 'granted', 'granted', 'unknown_job'],
    );

    sent.length = 0;
    const settles = await Promise.all(
      jobs.map((job, i) => {
        const lease = leases[i]!;
        assert.ok(lease.granted);
        return client.settle({ jobId: job.id, attempt: 1, tenant: job.tenant, token: lease.token, outcome: { kind: 'finished', result: { data: i } } });
      }),
    );
    assert.deepEqual(
      sent.map((m) => m.op),
      ['batch'],
    );
    assert.deepEqual(
      settles.map((s) => s.accepted && s.transition),
      ['finish', 'finish', 'finish'],
    );
    for (const [i, job] of jobs.entries()) {
      const stored = await ledger.getJob(job.id);
      assert.equal(stored?.state, 'finished');
      assert.deepEqual(stored?.result?.data, i);
    }
  });

  it('sends a request made alone as a plain request', async () => {
    const job = await submit();
    sent.length = 0;
    const lease = await client.lease({ jobId: job.id, attempt: 1, tenant: 'acme', worker: 'w1' });
    assert.ok(lease.granted);
    assert.deepEqual(
      sent.map((m) => m.op),
      ['lease'],
    );
  });

  it('refuses a bad request of a batch alone: the others are answered', async () => {
    const job = await submit();
    const [bad, good] = await Promise.allSettled([
      client.lease({ jobId: job.id, attempt: 0, tenant: 'acme', worker: 'w1' }),
      client.lease({ jobId: job.id, attempt: 1, tenant: 'acme', worker: 'w1' }),
    ]);
    assert.ok(bad.status === 'rejected' && bad.reason instanceof ControlError && bad.reason.code === 'invalid_request');
    assert.ok(good.status === 'fulfilled' && good.value.granted);
  });

  it('answers a malformed batch message with invalid_request', async () => {
    for (const message of [
      { op: 'batch', requests: [] },
      { op: 'batch', requests: 'lease' },
      { op: 'batch', requests: Array.from({ length: 129 }, () => ({})) },
    ]) {
      const answer = JSON.parse((await broker.request(topology.controlQueue, Buffer.from(JSON.stringify(message)), { timeoutMs: 2000 })).toString());
      assert.equal(answer.op, 'error');
      assert.equal(answer.code, 'invalid_request');
      assert.match(answer.message, /requests/);
    }
  });

  it('fails every request of a batch nobody answers, as each alone would have failed', async () => {
    const silent = new ControlClient(broker, new Topology('nobody-listens'), 200);
    await new Topology('nobody-listens').declareCore(broker);
    const outcomes = await Promise.allSettled([
      silent.fence({ jobId: 'a', attempt: 1, tenant: 'acme', token: 't' }),
      silent.progress({ jobId: 'b', attempt: 1, tenant: 'acme', token: 't', fraction: 0.5 }),
    ]);
    assert.deepEqual(
      outcomes.map((o) => o.status === 'rejected' && isBrokerError(o.reason, 'timeout')),
      [true, true],
    );
  });

  it('hands a lease granted after the caller gave up to onLateGrant; the other requests of its batch just time out', async () => {
    const topology = new Topology('late');
    const server = core.connect();
    await topology.declareCore(server);
    await server.serve(topology.controlQueue, async ({ body }) => {
      await new Promise((resolve) => setTimeout(resolve, 300));
      type Request = { op: string; jobId: string; attempt: number };
      const message = JSON.parse(body.toString()) as Request | { op: 'batch'; requests: Request[] };
      const answer = (r: Request) =>
        r.op === 'lease'
          ? { op: 'lease', jobId: r.jobId, attempt: r.attempt, granted: true, token: 't', ttlMs: 60_000, input: {}, requires: [] }
          : { op: 'fence', jobId: r.jobId, attempt: r.attempt, live: true, ttlMs: 60_000 };
      return Buffer.from(JSON.stringify('requests' in message ? { op: 'batch', answers: message.requests.map(answer) } : answer(message)));
    });
    const late: unknown[] = [];
    const order: string[] = [];
    const listening = new ControlClient(broker, topology, 100, 2000);
    const outcomes = await Promise.allSettled([
      listening
        .lease({ jobId: 'j1', attempt: 1, tenant: 'acme', worker: 'w1' }, (reply) => {
          order.push('late grant');
          late.push(reply);
        })
        .finally(() => order.push('lease told')),
      listening.fence({ jobId: 'j2', attempt: 1, tenant: 'acme', token: 't' }).finally(() => order.push('fence told')),
    ]);
    assert.deepEqual(
      outcomes.map((o) => o.status === 'rejected' && isBrokerError(o.reason, 'timeout')),
      [true, true],
    );
    await waitFor('the late grant', () => late.length === 1, 2000);
    assert.deepEqual(order, ['lease told', 'fence told', 'late grant'], 'both callers were told before the answer came');
    assert.deepEqual(late, [{ op: 'lease', jobId: 'j1', attempt: 1, granted: true, token: 't', ttlMs: 60_000, input: {}, requires: [] }]);

    // Without a late window, nobody listens after the timeout.
    const deaf = new ControlClient(broker, topology, 100);
    const missed: unknown[] = [];
    await assert.rejects(
      deaf.lease({ jobId: 'j3', attempt: 1, tenant: 'acme', worker: 'w1' }, (reply) => missed.push(reply)),
      (error: unknown) => isBrokerError(error, 'timeout'),
    );
    await new Promise((resolve) => setTimeout(resolve, 400));
    assert.deepEqual(missed, []);
  });
});
