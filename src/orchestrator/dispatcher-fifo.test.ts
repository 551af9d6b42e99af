/**
 * In fifo mode (work messages written at submit), the sweeper sends a lost work message again only where a worker stands idle: a backlog
 * behind busy workers, or with no worker at all, is only waiting in the queue, and a copy
 * per job per redispatch period would pile up there (in the embedded broker, in the
 * orchestrator's own memory) for as long as the backlog lasts.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { after, describe, it } from 'node:test';
import { EmbeddedBroker } from '../broker/embedded.js';
import { ManualClock } from '../core/clock.js';
import { silentLogger } from '../core/logger.js';
import type { Ledger } from '../ledger/ledger.js';
import { openSqliteLedger } from '../ledger/sqlite/sqlite-ledger.js';
import { Harness } from '../../test/testing/harness.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { waitFor } from '../../test/testing/wait.js';
import { Orchestrator } from './orchestrator.js';

const dir = tempDir('planrun-dispatch-fifo-');
after(() => dir.remove());
const redispatchAfterMs = 60_000;
let n = 0;

/** An orchestrator that is not started: its sweeper runs only when told, on a manual clock. */
async function setUp() {
  const clock = new ManualClock();
  const ledger = await openSqliteLedger({ path: join(dir.path, `ledger-${n++}.db`), clock, config: { redispatchAfterMs, dispatch: 'fifo' } });
  const broker = new EmbeddedBroker();
  const orchestrator = new Orchestrator({ ledger, broker: broker.connect(), logger: silentLogger(), leaseTtlMs: 90_000, clock });
  return {
    clock,
    ledger,
    orchestrator,
    close: async () => {
      await broker.close();
      await ledger.close();
    },
  };
}

/** What the relay would do: publish every waiting outbox row and mark it sent. */
async function relayAll(ledger: Ledger): Promise<void> {
  const rows = await ledger.outboxTake(1000);
  await ledger.outboxMarkSent(rows.map((row) => row.id));
}

const heartbeat = (worker: string, jobTypes: string[], running: number) => ({ worker, jobTypes, capabilities: [], slots: 2, running });

describe('sweeper redispatch (fifo dispatch)', () => {
  it('sends work again for a type only while one of its workers has a free slot', async () => {
    const { clock, ledger, orchestrator, close } = await setUp();
    try {
      const { job: render } = await orchestrator.submit({ tenant: 'acme', type: 'render', input: {} });
      const { job: transcode } = await orchestrator.submit({ tenant: 'acme', type: 'transcode', input: {} });
      await relayAll(ledger);

      clock.advance(redispatchAfterMs + 1);
      assert.deepEqual((await orchestrator.dispatcher.runOnce()).redispatched, [], 'no worker at all: the messages wait in the queue');

      clock.advance(redispatchAfterMs + 1);
      orchestrator.fleet.record(heartbeat('w-busy', ['render', 'transcode'], 2));
      assert.deepEqual((await orchestrator.dispatcher.runOnce()).redispatched, [], 'every slot busy: still only waiting');

      clock.advance(redispatchAfterMs + 1);
      orchestrator.fleet.record(heartbeat('w-idle', ['render'], 1));
      assert.deepEqual((await orchestrator.dispatcher.runOnce()).redispatched, [render.id], 'a render worker stands idle: the render message is lost or stuck');
      assert.deepEqual(
        (await ledger.outboxTake(10)).map((row) => row.jobId),
        [render.id],
        'a fresh work message for the render job only',
      );
      assert.equal((await ledger.getJob(transcode.id))?.state, 'queued');
    } finally {
      await close();
    }
  });

  it('a backlog with no worker keeps one work message per job, however long it waits', async () => {
    const { clock, ledger, orchestrator, close } = await setUp();
    try {
      await orchestrator.submitMany(Array.from({ length: 50 }, () => ({ tenant: 'acme', type: 'render', input: {} })));
      await relayAll(ledger);
      for (let period = 0; period < 10; period++) {
        clock.advance(redispatchAfterMs + 1);
        await orchestrator.dispatcher.runOnce();
      }
      assert.deepEqual(await ledger.outboxStats(), { unsent: 0, oldestCreatedAt: null }, 'ten periods: no copy written');
    } finally {
      await close();
    }
  });

  it('a lost work message is sent again once a worker of its type stands idle, and the job runs once', async () => {
    const broker = new EmbeddedBroker();
    const harness = await new Harness({ broker: broker.connect(), ledgerConfig: { redispatchAfterMs: 300, dispatch: 'fifo' }, sweepIntervalMs: 50 }).start();
    try {
      // The message is lost: a consumer that is no worker takes it and drops it.
      const workQueue = harness.topology.workQueue('probe');
      const app = broker.connect();
      await app.declareQueue(workQueue);
      const dropped: string[] = [];
      const dropper = await app.consume(
        workQueue,
        (delivery) => {
          dropped.push(String(delivery.messageId));
          delivery.ack();
        },
        { prefetch: 10 },
      );
      const { job } = await harness.orchestrator.submit({ tenant: 'acme', type: 'probe', input: { ms: 50, runLog: harness.runLog } });
      await waitFor('the work message to be taken', () => dropped.length > 0);
      // Many periods with no worker in the fleet: nothing is sent again.
      await delay(1_200);
      assert.equal(dropped.length, 1, 'no copy while no worker could run the job');
      await dropper.cancel();

      await harness.startWorker(broker.connect());
      const result = await waitFor('the result', () => harness.resultsFor(job.id)[0], 15_000);
      assert.equal(result.body.state, 'finished');
      assert.deepEqual(
        harness.runs(job.id).map((run) => run.attempt),
        [1],
        'attempt 1, run once',
      );
    } finally {
      await harness.close();
      await broker.close();
    }
  });
});
