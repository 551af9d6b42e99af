/**
 * The fleet is kept in memory: an orchestrator restarted on a ledger that holds jobs knows
 * only the workers heard from since. Found by the chaos run: right after a restart, one
 * heartbeat (the adversary's ghost, offering nothing) made the fleet look complete, and
 * jobs of the real workers' type failed as unroutable. For one lease TTL after such a
 * start, routing judges nothing; a fresh ledger is judged at once.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { EmbeddedBroker } from '../broker/embedded.js';
import { ManualClock } from '../core/clock.js';
import { silentLogger } from '../core/logger.js';
import { openSqliteLedger } from '../ledger/sqlite/sqlite-ledger.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { Orchestrator } from './orchestrator.js';

const dir = tempDir('planrun-fleet-refill-');
after(() => dir.remove());
const leaseTtlMs = 10_000;
const ghost = { worker: 'ghost', jobTypes: [], capabilities: [], slots: 1, running: 0 };

async function started(ledgerFile: string, clock: ManualClock) {
  const ledger = await openSqliteLedger({ path: join(dir.path, ledgerFile), clock });
  const broker = new EmbeddedBroker();
  const orchestrator = new Orchestrator({ ledger, broker: broker.connect(), logger: silentLogger(), leaseTtlMs, clock, sweepIntervalMs: 60_000 });
  await orchestrator.start();
  return {
    ledger,
    orchestrator,
    close: async () => {
      await orchestrator.stop();
      await broker.close();
      await ledger.close();
    },
  };
}

describe('the fleet after an orchestrator start', () => {
  it('on a ledger with jobs: nothing is failed as unroutable until a lease TTL has passed', async () => {
    const clock = new ManualClock();
    const first = await started('restarted.db', clock);
    await first.ledger.submit({ tenant: 'acme', type: 'render', input: {} });
    await first.close();

    const again = await started('restarted.db', clock);
    try {
      again.orchestrator.fleet.record(ghost);
      const early = await again.orchestrator.submit({ tenant: 'acme', type: 'render', input: {} });
      assert.equal(early.job.state, 'queued', 'the render workers may not have spoken yet');
      clock.advance(leaseTtlMs);
      again.orchestrator.fleet.record(ghost);
      const late = await again.orchestrator.submit({ tenant: 'acme', type: 'render', input: {} });
      assert.deepEqual([late.job.state, late.job.failureReason], ['failed', 'unroutable'], 'every live worker has been heard from by now');
    } finally {
      await again.close();
    }
  });

  it('on a fresh ledger: routing judges at once', async () => {
    const clock = new ManualClock();
    const fresh = await started('fresh.db', clock);
    try {
      fresh.orchestrator.fleet.record(ghost);
      const { job } = await fresh.orchestrator.submit({ tenant: 'acme', type: 'render', input: {} });
      assert.deepEqual([job.state, job.failureReason], ['failed', 'unroutable']);
    } finally {
      await fresh.close();
    }
  });
});
