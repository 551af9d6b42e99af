/**
 * Issue 18, finding 2, with a real worker on RabbitMQ: jobs whose input is nested
 * thousands of levels deep, recorded past the submission rules (straight through the
 * orchestrator, as a job written before the rules existed would be), once wedged the
 * worker's job processes: the deep jobs never settled and every later job failed with
 * "all 2 job processes are busy". Now each deep job ends once, and the worker runs normal
 * jobs on both slots afterwards.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Harness, probeJobsModule } from '../../test/testing/harness.js';
import { rabbitMqConnections } from '../../test/testing/rabbitmq-connections.js';
import { waitFor } from '../../test/testing/wait.js';

const shippedJobTypes = fileURLToPath(new URL('../job-types/index.js', import.meta.url));

/** `{"a":{"a":...{}}}`, `levels` objects deep, built without recursion. */
function nested(levels: number): unknown {
  let value: unknown = {};
  for (let level = 1; level < levels; level++) value = { a: value };
  return value;
}

describe('a worker given deeply nested input (RabbitMQ)', () => {
  let connections: Awaited<ReturnType<typeof rabbitMqConnections>>;
  let harness: Harness;
  before(async () => {
    connections = await rabbitMqConnections();
    harness = await new Harness({ broker: await connections.connect() }).start();
  });
  after(async () => {
    await harness.close();
    await connections.close();
  });

  it('fails each deep job once as invalid_input, and then runs normal jobs on both slots', async () => {
    await harness.startWorker(await connections.connect(), { slots: 2, jobModules: [probeJobsModule, shippedJobTypes] });
    await waitFor('the worker in the fleet', () => harness.orchestrator.fleet.list().length > 0);
    const deep: string[] = [];
    for (const levels of [1_000, 3_000, 4_000, 4_150, 4_180]) {
      deep.push((await harness.orchestrator.submit({ tenant: 'acme', type: 'checksum', input: nested(levels) })).job.id);
    }
    const ended = await waitFor('every deep job to end', async () => {
      const jobs = await Promise.all(deep.map((id) => harness.ledger.getJob(id)));
      return jobs.every((job) => job?.state === 'failed') ? jobs : undefined;
    });
    for (const job of ended) {
      assert.equal(job?.failureReason, 'permanent');
      assert.equal(job?.error?.code, 'invalid_input', job?.error?.message);
      assert.equal(job?.attempt, 1, 'it ran (or was refused) once');
    }

    const normal: string[] = [];
    for (let i = 0; i < 4; i++) {
      normal.push((await harness.orchestrator.submit({ tenant: 'acme', type: 'probe', input: { ms: 300, steps: 1, runLog: harness.runLog } })).job.id);
    }
    await waitFor('the normal jobs to finish', async () =>
      (await Promise.all(normal.map((id) => harness.ledger.getJob(id)))).every((job) => job?.state === 'finished' && job.attempt === 1),
    );
    assert.equal(new Set(harness.runs().map((run) => run.pid)).size, 2, 'both job processes ran them: none was lost');
  });
});
