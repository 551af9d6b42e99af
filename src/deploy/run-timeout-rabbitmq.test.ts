/**
 * `timeoutSeconds` in a submission (DESIGN.md's second-wave contract; issue 13), through
 * `planrun orchestrator` and `planrun worker` on RabbitMQ, with the SQLite and the
 * PostgreSQL ledger: the ledger keeps it with the job, the lease hands it to the worker,
 * the worker ends a run past it (abort signal, then SIGKILL after the grace) as Transient
 * `timeout`, retried while attempts remain; the job fails with code `timeout` after the
 * last. The same holds for a submission over the queue, and a timeout out of range is
 * refused on both paths before it reaches the ledger.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { RabbitMqBroker } from '../broker/rabbitmq.js';
import type { Client } from '../client/client.js';
import { isPlanrunApiError } from '../client/errors.js';
import { submissionLimits } from '../submission/rules.js';
import { rabbitMqUrl } from '../../test/testing/services.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { waitFor } from '../../test/testing/wait.js';
import { startProcessPair, type ProcessPair } from '../../test/testing/process-pair.js';
import { deadReasonHeader } from '../orchestrator/submit-consumer.js';
import type { Topology } from '../topology.js';

for (const ledger of ['sqlite', 'postgres'] as const) {
  describe(`timeoutSeconds in a submission (RabbitMQ, ${ledger === 'sqlite' ? 'SQLite' : 'PostgreSQL'})`, () => {
    const dir = tempDir('planrun-run-timeout-');
    const dead = new Map<string, string>();
    let pair: ProcessPair;
    let topology: Topology;
    let client: Client;
    let app: RabbitMqBroker;

    before(async () => {
      pair = await startProcessPair({ dir: dir.path, ledger, workerArgs: ['--slots', '2'], jobTypes: ['sleep', 'checksum', 'transcode'] });
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

    it('a run past the submission’s timeout is Transient timeout, retried, and the job fails with code timeout after the last attempt', async () => {
      const submitted = await client.submit('sleep', { ms: 60_000 }, { maxAttempts: 2, timeoutSeconds: 1 });
      assert.equal(submitted.timeoutSeconds, 1);
      const job = await client.wait(submitted.id, { timeoutMs: 30_000 });
      assert.equal(job.state, 'failed');
      assert.equal(job.timeoutSeconds, 1);
      assert.equal(job.error?.code, 'timeout');
      assert.deepEqual(
        job.attempts.map((a) => [a.error?.class, a.error?.code]),
        [
          ['transient', 'timeout'],
          ['transient', 'timeout'],
        ],
      );
      for (const attempt of job.attempts) {
        // Ended by the timeout (1 s), not by the 60 s sleep; the abort grace stays far below it.
        const tookMs = Date.parse(attempt.endedAt ?? '') - Date.parse(attempt.startedAt);
        assert.ok(tookMs < 20_000, `attempt ${attempt.attempt} took ${tookMs} ms`);
      }
    });

    it('a job within its timeout finishes, and one submitted without it shows null', async () => {
      const within = await client.submit('sleep', { ms: 50 }, { timeoutSeconds: 30 });
      assert.equal((await client.wait(within.id, { timeoutMs: 20_000 })).state, 'finished');
      const plain = await client.submit('sleep', { ms: 50 });
      const job = await client.wait(plain.id, { timeoutMs: 20_000 });
      assert.deepEqual([job.state, job.timeoutSeconds], ['finished', null]);
    });

    it('a queue submission carries timeoutSeconds too', async () => {
      const messageId = randomUUID();
      const body = { tenant: 'acme', type: 'sleep', input: { ms: 60_000 }, maxAttempts: 1, timeoutSeconds: 1 };
      await app.sendToQueue(topology.submitQueue, Buffer.from(JSON.stringify(body)), { messageId });
      const listed = await waitFor('the queued submission in the ledger', async () =>
        (await client.list({ type: 'sleep' })).jobs.find((j) => j.idempotencyKey === messageId),
      );
      const job = await client.wait(listed.id, { timeoutMs: 30_000 });
      assert.deepEqual([job.state, job.timeoutSeconds, job.error?.code], ['failed', 1, 'timeout']);
    });

    for (const timeoutSeconds of [0, 1.5, submissionLimits.timeoutSeconds + 1, '60']) {
      it(`timeoutSeconds ${JSON.stringify(timeoutSeconds)} is refused by the API and dead-lettered from the queue`, async () => {
        await assert.rejects(
          client.submit('sleep', { ms: 1 }, { timeoutSeconds: timeoutSeconds as number }),
          (error: unknown) => isPlanrunApiError(error) && error.status === 400 && /timeoutSeconds/.test(error.message),
        );
        const messageId = randomUUID();
        await app.sendToQueue(topology.submitQueue, Buffer.from(JSON.stringify({ tenant: 'acme', type: 'sleep', input: { ms: 1 }, timeoutSeconds })), {
          messageId,
        });
        assert.match(await waitFor(`the dead letter of ${messageId}`, () => dead.get(messageId), 20_000), /timeoutSeconds/);
      });
    }
  });
}
