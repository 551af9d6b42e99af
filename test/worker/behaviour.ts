/**
 * What a worker must do, written once and run on each broker (`worker-embedded.test.ts`,
 * `worker-rabbitmq.test.ts`). Each test gets its own orchestrator, ledger, topology
 * prefix and temp dir; intervals are short so every test finishes in seconds.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Broker } from '../../src/broker/broker.js';
import { decode, encode } from '../../src/control/protocol.js';
import { systemClock } from '../../src/core/clock.js';
import { ControlHandler } from '../../src/orchestrator/control-handler.js';
import { Fleet } from '../../src/orchestrator/fleet.js';
import { Harness } from '../testing/harness.js';
import { waitFor } from '../testing/wait.js';

export interface BrokerConnections {
  connect(): Promise<Broker>;
  close(): Promise<void>;
}

export function workerBehaviour(name: string, makeConnections: () => Promise<BrokerConnections>): void {
  describe(`worker behaviour on ${name}`, () => {
    let connections: BrokerConnections;
    before(async () => {
      connections = await makeConnections();
    });
    after(async () => {
      await connections.close();
    });

    async function withHarness(
      options: { ledgerConfig?: ConstructorParameters<typeof Harness>[0]['ledgerConfig'] },
      body: (harness: Harness) => Promise<void>,
    ): Promise<void> {
      const harness = await new Harness({ broker: await connections.connect(), ...options }).start();
      try {
        await body(harness);
      } finally {
        await harness.close();
      }
    }

    it('a lease TTL shorter than the heartbeat interval still holds a long job (the first renewal is immediate)', () =>
      withHarness({ ledgerConfig: { leaseTtlMs: 600 } }, async (harness) => {
        // Heartbeat every 400 ms against a 600 ms TTL: without the renewal at grant the
        // lease would lapse before the first tick lands; the job runs 1.5 s, several TTLs.
        const { events } = await harness.startWorker(await connections.connect(), { timing: { heartbeatIntervalMs: 400 } });
        const { job } = await harness.orchestrator.submit({ tenant: 'acme', type: 'probe', input: { ms: 1500, runLog: harness.runLog } });
        await waitFor('the result', () => harness.resultsFor(job.id)[0], 15_000);
        const stored = await harness.ledger.getJob(job.id);
        assert.equal(stored?.state, 'finished');
        assert.equal(stored?.attempt, 1);
        assert.equal(harness.runs(job.id).length, 1);
        assert.equal(events.filter((e) => e.type === 'lease_lost').length, 0);
      }));

    it('a Permanent error runs once and fails the job with its code', () =>
      withHarness({}, async (harness) => {
        await harness.startWorker(await connections.connect());
        const { job } = await harness.orchestrator.submit({ tenant: 'acme', type: 'probe', input: { ms: 50, runLog: harness.runLog, fail: 'permanent' } });
        const result = await waitFor('the failure message', () => harness.resultsFor(job.id)[0]);
        assert.equal(result.routingKey, 'acme.probe.failed');
        assert.equal(result.body.reason, 'permanent');
        assert.deepEqual(result.body.error, { class: 'permanent', code: 'probe_permanent', message: 'failed permanently on purpose' });
        assert.equal(harness.runs(job.id).length, 1);
      }));

    it('a Transient error retries with backoff until attempts run out, then fails exhausted', () =>
      withHarness({ ledgerConfig: { backoffBaseMs: 100 } }, async (harness) => {
        await harness.startWorker(await connections.connect());
        const { job } = await harness.orchestrator.submit({
          tenant: 'acme',
          type: 'probe',
          input: { ms: 20, runLog: harness.runLog, fail: 'transient' },
          maxAttempts: 3,
        });
        const result = await waitFor('the failure message', () => harness.resultsFor(job.id)[0], 15_000);
        assert.equal(result.body.reason, 'exhausted');
        assert.equal(result.body.attempt, 3);
        assert.equal(result.body.error?.code, 'probe_transient');
        assert.deepEqual(
          harness.runs(job.id).map((r) => r.attempt),
          [1, 2, 3],
        );
        const attempts = await harness.ledger.getAttempts(job.id);
        assert.deepEqual(
          attempts.map((a) => a.outcome),
          ['retried', 'retried', 'failed'],
        );
        // The backoff (100 ms, then 200 ms) separates each attempt from the end of the one before.
        for (let i = 1; i < attempts.length; i++) {
          const waited = attempts[i]!.startedAt - attempts[i - 1]!.endedAt!;
          assert.ok(waited >= 100 * 2 ** (i - 1), `attempt ${i + 1} started ${waited} ms after attempt ${i} ended`);
        }
        assert.equal(harness.resultsFor(job.id).length, 1);
      }));

    it('a Fatal error stops the worker, which records it on the attempt and hands the job back: another worker starts attempt 2 at once, not a TTL later', () =>
      // A 60 s lease and backoff: waiting for the lease to run out would time the test out.
      withHarness({ ledgerConfig: { leaseTtlMs: 60_000, backoffBaseMs: 60_000 } }, async (harness) => {
        let fatal: unknown;
        const broken = await harness.startWorker(await connections.connect(), { onFatal: (error) => (fatal = error) });
        const { job } = await harness.orchestrator.submit({
          tenant: 'acme',
          type: 'probe',
          input: { ms: 20, runLog: harness.runLog, fail: 'fatal' },
        });
        await waitFor('the fatal stop', () => fatal);
        assert.deepEqual(fatal, { class: 'fatal', code: 'probe_fatal', message: 'the worker is broken, on purpose' });
        assert.equal(broken.events.filter((e) => e.type === 'settled').length, 0, 'a fatal worker settles nothing');
        assert.deepEqual(
          broken.events.filter((e) => e.type === 'handed_back'),
          [{ type: 'handed_back', jobId: job.id, attempt: 1, code: 'probe_fatal', outcome: 'release' }],
        );
        const [first] = await harness.ledger.getAttempts(job.id);
        assert.deepEqual([first?.outcome, first?.error], ['released', fatal]);
        // Attempt 2 fails the same way on the next worker; what matters here is that it
        // starts at once, and that the broken worker took no more work.
        const second = await harness.startWorker(await connections.connect(), { onFatal: () => undefined });
        await waitFor('attempt 2 to start', () => harness.runs(job.id).length >= 2, 10_000);
        assert.equal(broken.events.filter((e) => e.type === 'lease_granted').length, 1);
        assert.ok(second.events.some((e) => e.type === 'lease_granted' && e.attempt === 2));
      }));

    it('the same work message delivered twice runs once', () =>
      withHarness({}, async (harness) => {
        const broker = await connections.connect();
        const { events } = await harness.startWorker(broker, { slots: 2 });
        const { job } = await harness.orchestrator.submit({ tenant: 'acme', type: 'probe', input: { ms: 400, runLog: harness.runLog } });
        await waitFor('the lease', () => events.some((e) => e.type === 'lease_granted'));
        // Publish the very same work message again while the job runs.
        const duplicate = Buffer.from(JSON.stringify({ jobId: job.id, attempt: 1, tenant: 'acme', type: 'probe' }));
        await broker.sendToQueue(harness.topology.workQueue('probe'), duplicate, { messageId: `${job.id}@1`, headers: { 'planrun-tenant': 'acme' } });
        await waitFor('the result', () => harness.resultsFor(job.id)[0]);
        await waitFor('the duplicate to be dropped', () => events.some((e) => e.type === 'duplicate_dropped'));
        assert.equal(harness.runs(job.id).length, 1);
        assert.equal(events.filter((e) => e.type === 'lease_granted').length, 1);
      }));

    it('a duplicate that reaches another worker is refused by the ledger and runs nowhere', () =>
      withHarness({}, async (harness) => {
        const first = await harness.startWorker(await connections.connect(), { slots: 1 });
        const { job } = await harness.orchestrator.submit({ tenant: 'acme', type: 'probe', input: { ms: 100, runLog: harness.runLog } });
        await waitFor('the result', () => harness.resultsFor(job.id)[0]);
        await first.stop();
        const second = await harness.startWorker(await connections.connect(), { slots: 1 });
        const broker = await connections.connect();
        const duplicate = Buffer.from(JSON.stringify({ jobId: job.id, attempt: 1, tenant: 'acme', type: 'probe' }));
        await broker.sendToQueue(harness.topology.workQueue('probe'), duplicate, { messageId: `${job.id}@1`, headers: { 'planrun-tenant': 'acme' } });
        await waitFor('the refusal', () => second.events.find((e) => e.type === 'lease_refused'));
        assert.deepEqual(
          second.events.find((e) => e.type === 'lease_refused'),
          { type: 'lease_refused', jobId: job.id, attempt: 1, reason: 'ended' },
        );
        assert.equal(harness.runs(job.id).length, 1);
        assert.equal(harness.resultsFor(job.id).length, 1);
        await broker.close();
      }));

    it('a burst never runs more jobs than the slots', () =>
      withHarness({}, async (harness) => {
        const slots = 2;
        const { worker, events } = await harness.startWorker(await connections.connect(), { slots });
        let peak = 0;
        const unsubscribe = worker.onEvent(() => (peak = Math.max(peak, worker.runningJobs)));
        const submitted = await harness.orchestrator.submitMany(
          Array.from({ length: 8 }, () => ({ tenant: 'acme', type: 'probe', input: { ms: 150, steps: 2, runLog: harness.runLog } })),
        );
        await waitFor('every result', () => submitted.every(({ job }) => harness.resultsFor(job.id).length === 1), 20_000);
        unsubscribe();
        assert.ok(peak <= slots, `peak ${peak} running jobs with ${slots} slots`);
        assert.equal(peak, slots, 'the burst used every slot');
        assert.equal(harness.runs().length, 8);
        // The result message can overtake the settle's reply to the worker.
        await waitFor('every settle reply', () => events.filter((e) => e.type === 'settled').length === 8);
      }));

    it('without the disk reserve the job is not started and its message goes back', () =>
      withHarness({}, async (harness) => {
        const { events } = await harness.startWorker(await connections.connect(), {
          slots: 1,
          freeBytes: async () => 100, // less than the probe type's 1 KiB reserve
        });
        const { job } = await harness.orchestrator.submit({ tenant: 'acme', type: 'probe', input: { ms: 10, runLog: harness.runLog } });
        await waitFor('two refusals (the message came back)', () => events.filter((e) => e.type === 'admission_refused').length >= 2);
        assert.equal(events.filter((e) => e.type === 'lease_granted').length, 0);
        assert.equal(harness.runs(job.id).length, 0);
        assert.equal((await harness.ledger.getJob(job.id))?.state, 'queued');
        // A worker with room takes it.
        await harness.startWorker(await connections.connect(), { slots: 1 });
        await waitFor('the result', () => harness.resultsFor(job.id)[0]);
      }));

    it('a worker reports its capabilities and job types with its heartbeat; a job needing one nobody has fails at once', () =>
      withHarness({}, async (harness) => {
        const { worker } = await harness.startWorker(await connections.connect(), { capabilities: ['ffmpeg'] });
        const member = await waitFor('the worker in the fleet', () => harness.orchestrator.fleet.list().find((m) => m.worker === worker.id));
        assert.deepEqual(member.capabilities, ['ffmpeg']);
        assert.deepEqual(member.jobTypes, ['probe']);
        const { job } = await harness.orchestrator.submit({ tenant: 'acme', type: 'probe', input: {}, requires: ['gpu'] });
        assert.equal(job.state, 'failed');
        assert.equal(job.failureReason, 'unroutable');
        assert.match(job.error?.message ?? '', /missing "gpu"/);
        const result = await waitFor('the failure message', () => harness.resultsFor(job.id)[0]);
        assert.equal(result.routingKey, 'acme.probe.failed');
        assert.equal(harness.runs(job.id).length, 0);
      }));

    it('submissions over the submit queue: each becomes one job, even sent twice; malformed ones are dead-lettered while good ones flow', () =>
      withHarness({}, async (harness) => {
        const app = await connections.connect();
        await harness.startWorker(await connections.connect());
        const send = (messageId: string | undefined, body: unknown) =>
          app.sendToQueue(harness.topology.submitQueue, Buffer.from(typeof body === 'string' ? body : JSON.stringify(body)), messageId ? { messageId } : {});
        const good = { tenant: 'acme', type: 'probe', input: { ms: 10, runLog: harness.runLog } };
        await send('order-1', good);
        await send('order-1', good);
        await send('order-2', 'not json at all');
        await send('order-3', { tenant: 'acme', input: {} });
        await send(undefined, good);
        await send('order-4', good);
        const dead: Array<{ id: string | undefined; reason: unknown }> = [];
        await app.consume(
          harness.topology.deadQueue,
          (d) => {
            dead.push({ id: d.messageId, reason: d.headers['planrun-dead-reason'] });
            d.ack();
          },
          { prefetch: 10 },
        );
        await waitFor('three dead letters', () => dead.length === 3);
        assert.deepEqual(dead.map((d) => d.id).sort(), ['order-2', 'order-3', undefined].sort());
        assert.match(String(dead.find((d) => d.id === 'order-3')?.reason), /type/);
        assert.match(String(dead.find((d) => d.id === undefined)?.reason), /message id/);
        await waitFor('two results', () => harness.results.length === 2);
        const page = await harness.ledger.listJobs({ tenant: 'acme' });
        assert.deepEqual(page.jobs.map((j) => j.idempotencyKey).sort(), ['order-1', 'order-4']);
        assert.equal(harness.runs().length, 2);
        await app.close();
      }));

    it('when the orchestrator does not answer, the work message goes back unacked and the job runs once it answers', () =>
      withHarness({}, async (harness) => {
        const { events } = await harness.startWorker(await connections.connect(), { timing: { controlTimeoutMs: 300, redeliveryDelayMs: 50 } });
        await harness.orchestrator.stop();
        const { job } = await harness.ledger.submit({ tenant: 'acme', type: 'probe', input: { ms: 10, runLog: harness.runLog } });
        const app = await connections.connect();
        const work = Buffer.from(JSON.stringify({ jobId: job.id, attempt: 1, tenant: 'acme', type: 'probe' }));
        await app.sendToQueue(harness.topology.workQueue('probe'), work, { messageId: `${job.id}@1`, headers: { 'planrun-tenant': 'acme' } });
        const unanswered = () => harness.runs(job.id).length === 0 && !events.some((e) => e.type === 'lease_granted');
        // No answer for a while: nothing runs, and the message is not acked away.
        await new Promise((resolve) => setTimeout(resolve, 1000));
        assert.ok(unanswered(), 'nothing ran while the orchestrator was away');
        await harness.orchestrator.start();
        const result = await waitFor('the result once the orchestrator answers', () => harness.resultsFor(job.id)[0], 10_000);
        assert.equal(result.body.state, 'finished');
        assert.equal(result.body.attempt, 1);
        assert.equal(harness.runs(job.id).length, 1);
        await app.close();
      }));

    it('a lease granted after the worker stopped waiting is used at once, not left to run out', () =>
      withHarness({}, async (harness) => {
        // The orchestrator takes the first lease request and answers it late (as after a cut it had
        // not noticed); everything else is answered at once, by the same rules.
        await harness.orchestrator.stop();
        const handler = new ControlHandler(harness.ledger, new Fleet(systemClock, 60_000), { leaseTtlMs: 2000 });
        let delayed = 0;
        const answerOne = async (request: unknown) => {
          if ((request as { op?: string }).op === 'lease' && delayed++ === 0) await new Promise((resolve) => setTimeout(resolve, 600));
          return handler.handle(request);
        };
        const standIn = await connections.connect();
        await standIn.serve(harness.topology.controlQueue, async ({ body }) => {
          const message = decode(body) as { op?: string; requests?: unknown[] };
          const answer = message.op === 'batch' ? { op: 'batch', answers: await Promise.all(message.requests!.map(answerOne)) } : await answerOne(message);
          return encode(answer);
        });
        // The message the worker gives back comes again only after 3 s: well after the late grant.
        const { events } = await harness.startWorker(await connections.connect(), { timing: { controlTimeoutMs: 300, redeliveryDelayMs: 3000 } });
        const { job } = await harness.ledger.submit({ tenant: 'acme', type: 'probe', input: { ms: 10, runLog: harness.runLog } });
        const app = await connections.connect();
        const work = Buffer.from(JSON.stringify({ jobId: job.id, attempt: 1, tenant: 'acme', type: 'probe' }));
        await app.sendToQueue(harness.topology.workQueue('probe'), work, { messageId: `${job.id}@1`, headers: { 'planrun-tenant': 'acme' } });
        const finished = await waitFor(
          'the job finished on its first attempt',
          async () => {
            const stored = await harness.ledger.getJob(job.id);
            return stored?.state === 'finished' ? stored : undefined;
          },
          10_000,
        );
        assert.equal(finished.attempt, 1);
        assert.ok(!events.some((e) => e.type === 'duplicate_dropped'), 'finished before the message came back');
        assert.ok(
          events.some((e) => e.type === 'lease_granted' && e.late === true),
          'the late grant was used',
        );
        assert.equal(harness.runs(job.id).length, 1);
        // The redelivery that comes later is dropped as a duplicate, and runs nothing.
        await waitFor('the redelivery dropped', () => events.some((e) => e.type === 'duplicate_dropped' && e.jobId === job.id), 10_000);
        assert.equal(harness.runs(job.id).length, 1);
        await app.close();
        await standIn.close();
      }));

    it('a cancelled running job is stopped and fails as cancelled', () =>
      withHarness({}, async (harness) => {
        const { events } = await harness.startWorker(await connections.connect(), { timing: { heartbeatIntervalMs: 100 } });
        const { job } = await harness.orchestrator.submit({ tenant: 'acme', type: 'probe', input: { ms: 5000, runLog: harness.runLog } });
        await waitFor('the lease', () => events.some((e) => e.type === 'lease_granted'));
        const cancel = await harness.ledger.cancel({ jobId: job.id, tenant: 'acme' });
        assert.equal(cancel.outcome, 'cancel_requested');
        const result = await waitFor('the failure message', () => harness.resultsFor(job.id)[0]);
        assert.equal(result.body.reason, 'cancelled');
        assert.ok(events.some((e) => e.type === 'lease_lost' && e.reason === 'cancelled'));
      }));
  });
}
