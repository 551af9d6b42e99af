/**
 * Issue 14, retention, on SQLite and on PostgreSQL: ended jobs older than `--retain` are
 * deleted in small batches with their attempts and their folder-store outputs, counted in
 * `planrun_jobs_pruned_total`; a running job stays, and no result message is touched. The
 * pass runs on an injected clock that stands hours later; the orchestrator's own pass runs
 * with a retention of 300 ms.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { EmbeddedBroker } from '../broker/embedded.js';
import { silentLogger } from '../core/logger.js';
import { openPostgresLedger } from '../ledger/postgres/postgres-ledger.js';
import { Harness, type HarnessOptions } from '../../test/testing/harness.js';
import { fastTestUrl, TestSchemas } from '../../test/ledger/postgres/testing.js';
import { waitFor } from '../../test/testing/wait.js';
import { RetentionPass } from './retention.js';

const hour = 3_600_000;

async function withHarness(options: Omit<HarnessOptions, 'broker'>, body: (harness: Harness, broker: EmbeddedBroker) => Promise<void>): Promise<void> {
  const broker = new EmbeddedBroker();
  const harness = await new Harness({ broker: broker.connect(), ...options }).start();
  try {
    await body(harness, broker);
  } finally {
    await harness.close();
    await broker.close();
  }
}

/** Runs `count` probe jobs of acme to their end (`fail` to fail them) and waits for their result messages. */
async function runJobs(harness: Harness, count: number, fail = false): Promise<string[]> {
  const ids: string[] = [];
  for (let n = 0; n < count; n++) {
    const { job } = await harness.orchestrator.submit({
      tenant: 'acme',
      type: 'probe',
      input: { ms: 1, runLog: harness.runLog, ...(fail ? { fail: 'permanent' } : {}) },
    });
    ids.push(job.id);
  }
  await waitFor('the result messages', () => ids.every((id) => harness.resultsFor(id).length === 1));
  await waitFor('the outbox to drain', async () => (await harness.ledger.outboxStats()).unsent === 0);
  return ids;
}

function retentionSuite(ledgerName: string, options: () => Omit<HarnessOptions, 'broker'>): void {
  describe(`retention (${ledgerName})`, () => {
    it('prunes ended jobs past the retention period in batches, with their attempts and outputs; a running job and the result messages stay', () =>
      withHarness(options(), async (harness, broker) => {
        await harness.startWorker(broker.connect());
        const finished = await runJobs(harness, 2);
        const [failed] = await runJobs(harness, 1, true);
        const { job: running } = await harness.orchestrator.submit({ tenant: 'acme', type: 'probe', input: { ms: 60_000, runLog: harness.runLog } });
        await waitFor('the long job to run', async () => (await harness.ledger.getJob(running.id))?.state === 'running');
        const outputFolder = join(harness.outputRoot, 'acme', finished[0]!);
        assert.ok(existsSync(outputFolder), 'the folder store holds the output');

        let offset = 0;
        const counted: number[] = [];
        const pass = new RetentionPass(
          harness.ledger,
          { outputDir: harness.outputRoot },
          silentLogger(),
          { now: () => Date.now() + offset },
          { retainMs: 14 * 24 * hour, batch: 1, batchesPerPass: 2 },
          (n) => counted.push(n),
        );
        assert.equal(await pass.pass(), 0, 'nothing is old enough yet');
        offset = 15 * 24 * hour;
        assert.equal(await pass.pass(), 2, 'two batches of one');
        assert.equal(await pass.pass(), 1);
        assert.equal(await pass.pass(), 0);
        assert.deepEqual(counted, [1, 1, 1]);
        for (const id of [...finished, failed!]) {
          assert.equal(await harness.ledger.getJob(id), undefined, `${id} pruned`);
          assert.deepEqual(await harness.ledger.getAttempts(id), []);
          assert.equal(harness.resultsFor(id).length, 1, 'its one result message went out before, and no other');
        }
        assert.equal(existsSync(outputFolder), false, "the job's folder-store outputs went with it");
        assert.equal((await harness.ledger.getJob(running.id))?.state, 'running', 'a running job is never pruned');
      }));

    it("the orchestrator's own pass prunes on its interval and counts it in planrun_jobs_pruned_total", () =>
      withHarness({ ...options(), retention: { retainMs: 300, intervalMs: 100 } }, async (harness, broker) => {
        await harness.startWorker(broker.connect());
        const [id] = await runJobs(harness, 1);
        await waitFor('the job to be pruned', async () => (await harness.ledger.getJob(id!)) === undefined);
        const { body } = await harness.orchestrator.metrics.render();
        assert.match(body, /^planrun_jobs_pruned_total 1$/m);
      }));
  });
}

retentionSuite('SQLite', () => ({}));

const schemas = new TestSchemas();
after(() => schemas.dropAll());
retentionSuite('PostgreSQL', () => {
  const schema = schemas.reserve();
  return { openLedger: (config) => openPostgresLedger({ connectionString: fastTestUrl(), schema, config, poolSize: 4 }) };
});
