/**
 * `limits` in a submission (issue 13), through `planrun orchestrator` and `planrun worker`
 * on RabbitMQ, with the SQLite and the PostgreSQL ledger: the ledger keeps them with the
 * job, the lease hands them to the worker, and the worker enforces the lower of each
 * limit and its job type's in the job's cgroup, so a submission can tighten its type's
 * limits and never loosen them. Limits out of range are refused by the API (400) and
 * dead-lettered from the queue, before they reach the ledger.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { RabbitMqBroker } from '../broker/rabbitmq.js';
import type { Client } from '../client/client.js';
import { isPlanrunApiError } from '../client/errors.js';
import { deadReasonHeader } from '../orchestrator/submit-consumer.js';
import type { Topology } from '../topology.js';
import type { JobLimits } from '../wire/jobs.js';
import { startProcessPair, type ProcessPair } from '../../test/testing/process-pair.js';
import { rabbitMqUrl } from '../../test/testing/services.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { waitFor } from '../../test/testing/wait.js';

const HOSTILE_JOBS = fileURLToPath(new URL('../../test/worker/runner/fixtures/hostile-jobs.js', import.meta.url));

for (const ledger of ['sqlite', 'postgres'] as const) {
  describe(`limits in a submission (RabbitMQ, ${ledger === 'sqlite' ? 'SQLite' : 'PostgreSQL'})`, () => {
    const dir = tempDir('planrun-submission-limits-');
    const dead = new Map<string, string>();
    let pair: ProcessPair;
    let topology: Topology;
    let client: Client;
    let app: RabbitMqBroker;

    before(async () => {
      pair = await startProcessPair({
        dir: dir.path,
        ledger,
        workerArgs: ['--jobs', HOSTILE_JOBS, '--slots', '2'],
        jobTypes: ['hostile-fork', 'hostile-memory'],
      });
      ({ topology, client } = pair);
      app = await RabbitMqBroker.connect({ url: rabbitMqUrl });
      await app.consume(
        topology.deadQueue,
        (delivery) => {
          dead.set(String(delivery.messageId), String(delivery.headers[deadReasonHeader]));
          delivery.ack();
        },
        { prefetch: 10 },
      );
    });

    after(async () => {
      await app.close();
      await pair.stop();
      dir.remove();
    });

    async function outcome(type: string, input: unknown, limits?: JobLimits): Promise<{ state: string; error: string | undefined; limits: JobLimits | null }> {
      const submitted = await client.submit(type, input, { maxAttempts: 1, ...(limits ? { limits } : {}) });
      const job = await client.wait(submitted.id, { timeoutMs: 60_000 });
      return { state: job.state, error: job.error ? `${job.error.class} ${job.error.code}` : undefined, limits: job.limits };
    }

    it('a submission’s processes limit below its type’s ends a job the type’s alone would let finish: Permanent resource_limit', async () => {
      // hostile-fork declares 64; 30 processes fit in it.
      assert.deepEqual(await outcome('hostile-fork', { count: 30 }), { state: 'finished', error: undefined, limits: null });
      assert.deepEqual(await outcome('hostile-fork', { count: 30 }, { processes: 20 }), {
        state: 'failed',
        error: 'permanent resource_limit',
        limits: { processes: 20 },
      });
    });

    it('a limit above the type’s does not loosen it', async () => {
      assert.deepEqual(await outcome('hostile-fork', { count: 200 }, { processes: 1000 }), {
        state: 'failed',
        error: 'permanent resource_limit',
        limits: { processes: 1000 },
      });
    });

    it('a submission’s memory limit below its type’s is enforced too', async () => {
      // hostile-memory declares 128 MB; holding 64 MB beside Node's own fits in it, not in 64.
      assert.deepEqual((await outcome('hostile-memory', { mb: 64 })).state, 'finished');
      assert.deepEqual(await outcome('hostile-memory', { mb: 64 }, { memoryMb: 64 }), {
        state: 'failed',
        error: 'permanent resource_limit',
        limits: { memoryMb: 64 },
      });
    });

    it('a queue submission carries limits too', async () => {
      const messageId = randomUUID();
      const body = { tenant: 'acme', type: 'hostile-fork', input: { count: 30 }, maxAttempts: 1, limits: { processes: 20 } };
      await app.sendToQueue(topology.submitQueue, Buffer.from(JSON.stringify(body)), { messageId });
      const listed = await waitFor('the queued submission in the ledger', async () =>
        (await client.list({ type: 'hostile-fork' })).jobs.find((j) => j.idempotencyKey === messageId),
      );
      const job = await client.wait(listed.id, { timeoutMs: 60_000 });
      assert.deepEqual([job.state, job.limits, job.error?.code], ['failed', { processes: 20 }, 'resource_limit']);
    });

    for (const limits of [{}, { memoryMb: 10 }, { processes: 2.5 }, { cpu: 1 }, { processes: '20' }]) {
      it(`limits ${JSON.stringify(limits)} are refused by the API and dead-lettered from the queue`, async () => {
        await assert.rejects(
          client.submit('hostile-fork', { count: 1 }, { limits: limits as JobLimits }),
          (error: unknown) => isPlanrunApiError(error) && error.status === 400 && /limits/.test(error.message),
        );
        const messageId = randomUUID();
        await app.sendToQueue(topology.submitQueue, Buffer.from(JSON.stringify({ tenant: 'acme', type: 'hostile-fork', input: { count: 1 }, limits })), {
          messageId,
        });
        assert.match(await waitFor(`the dead letter of ${messageId}`, () => dead.get(messageId), 20_000), /limits/);
      });
    }
  });
}
