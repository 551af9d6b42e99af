/**
 * The network blip scenario on the real RabbitMQ, shared by the folder-store
 * (src/worker/network-blip-rabbitmq.test.ts) and the S3-store
 * (src/worker/network-blip-s3-rabbitmq.test.ts) tests, which add what each store must show.
 * Worker A reaches the broker through a TCP proxy, worker B and the orchestrator directly.
 * A leases the job and starts it; then A's cable is cut (`proxy.blackhole()`). A is
 * healthy, only cut off: its child keeps running. Its heartbeats go unanswered, its lease
 * expires in the ledger, the sweeper makes attempt 2, B leases and finishes it. Then A
 * finishes late. Asserted here, whatever the store: nothing of A's is stored or settled,
 * the ledger refuses A's fence and settle when A sends them with its (attempt 1) token, the
 * result (one message) and the ledger name attempt 2's output location.
 *
 * To make A finish *late* (after B) the job type `stubborn` ignores its abort signal,
 * attempt 1 is held by a gate file the test opens when it wants A to finish, and A's pool
 * has a long abort grace, so A's child is neither stopped nor killed when A gives up on
 * the lease. Three variants take the three ways a late worker can find out it lost:
 *
 * 1. local deadline: A's deadline timer runs (every 50 ms). While cut off, A's own lease
 *    deadline passes (lease_lost `local_deadline_passed`), before the ledger hands the
 *    job on. Healed, A finishes late and abandons the attempt (no fence, no store, no settle).
 * 2. fence on the local deadline: A's deadline timer is stalled (a huge
 *    `deadlineCheckIntervalMs`, as if its event loop froze), so A never noticed. A's job
 *    finishes late while A is still cut off; the fence cannot reach the ledger and trusts
 *    the local deadline, which has passed: fenced_out, nothing stored.
 * 3. heartbeat: the deadline timer is stalled again; the cut lasts until A's AMQP
 *    connection is declared dead (1 s heartbeats), then the cable is healed; A reconnects
 *    and its next heartbeat learns from the ledger that the job has ended (lease_lost
 *    `ended`); then A finishes late and abandons the attempt.
 *
 * In variants 1 and 2 the cut lasts about 2 s, about as long as the AMQP heartbeats take
 * to give up on A's connection: it may survive (what the proxy held flows on at the
 * heal, stale requests included) or be replaced; either way the outcome must be the same.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import type { Broker } from '../../src/broker/broker.js';
import { RabbitMqBroker } from '../../src/broker/rabbitmq.js';
import { ControlClient } from '../../src/worker/control-client.js';
import type { WorkerEvent } from '../../src/worker/worker-events.js';
import type { Job } from '../../src/ledger/ledger.js';
import { Harness, type HarnessOptions, type ReceivedResult, type TestWorker } from '../testing/harness.js';
import { FaultProxy } from '../testing/fault-proxy.js';
import { rabbitMqUrl } from '../testing/services.js';
import { waitFor } from '../testing/wait.js';
import { stubbornOutputFile, witnessPath, type StubbornInput, type StubbornWitness } from './fixtures/stubborn-jobs.js';

const stubbornJobsModule = fileURLToPath(new URL('./fixtures/stubborn-jobs.js', import.meta.url));

const leaseTtlMs = 1500;
const heartbeatIntervalMs = 300;
const stalledTimerMs = 3_600_000;

export type Variant = 'local deadline' | 'fence on the local deadline' | 'heartbeat';

export interface Timed {
  at: number;
  event: WorkerEvent;
}

function timeline(worker: TestWorker): Timed[] {
  const events: Timed[] = [];
  worker.worker.onEvent((event) => events.push({ at: Date.now(), event }));
  return events;
}

export function ofType<T extends WorkerEvent['type']>(events: Timed[], type: T): Array<{ at: number; event: Extract<WorkerEvent, { type: T }> }> {
  return events.filter((e): e is { at: number; event: Extract<WorkerEvent, { type: T }> } => e.event.type === type);
}

async function connect(url: string, opened: Broker[]): Promise<RabbitMqBroker> {
  // Short AMQP heartbeats, connect timeout and retry: A's connection is declared dead
  // within seconds of the cut, and it reconnects promptly once healed.
  const broker = await RabbitMqBroker.connect({ url, heartbeatSeconds: 1, connectTimeoutMs: 1000, retry: { initialMs: 100, maxMs: 300 } });
  opened.push(broker);
  return broker;
}

function viaProxy(proxy: FaultProxy): string {
  const url = new URL(rabbitMqUrl);
  url.hostname = '127.0.0.1';
  url.port = String(proxy.port);
  return url.toString();
}

function readWitness(path: string): StubbornWitness {
  return JSON.parse(readFileSync(path, 'utf8')) as StubbornWitness;
}

/** The test titles of the three variants. */
export const variants: ReadonlyArray<[Variant, string]> = [
  ['local deadline', "A's local deadline passes while it is cut off; it abandons its late result"],
  ['fence on the local deadline', "A's deadline timer is stalled; it finishes while cut off and its fence trusts the passed local deadline"],
  ['heartbeat', "A's deadline timer is stalled; healed, its heartbeat learns the job ended; it abandons its late result"],
];

/** What the scenario leaves for a store's own assertions. */
export interface Blip {
  harness: Harness;
  job: Job;
  result: ReceivedResult;
  bGranted: Timed;
  witnessA: StubbornWitness;
  witnessB: StubbornWitness;
}

export interface BlipStore {
  /** The orchestrator's store, if not its workers' folders. */
  harness?: Pick<HarnessOptions, 'objectStore'>;
  /** Where attempt n's output is stored (what a result names). */
  locationOf(harness: Harness, jobId: string, attempt: number): string;
  /** What a fence sent with A's stale token asks besides (the S3 store: the outputs it would upload). */
  staleFenceExtra?: (witnessA: StubbornWitness) => Record<string, unknown>;
  /** Called once the orchestrator is started, before any job. */
  started?(harness: Harness): void;
  /** The store's own assertions, once every shared one held. */
  check(blip: Blip): Promise<void>;
  /** Its own cleanup, after the harness closed. */
  close?(): Promise<void>;
}

export async function networkBlip(variant: Variant, store: BlipStore): Promise<void> {
  const brokers: Broker[] = [];
  const proxy = await FaultProxy.start({ port: Number(new URL(rabbitMqUrl).port || 5672), host: new URL(rabbitMqUrl).hostname });
  const orchestratorBroker = await connect(rabbitMqUrl, brokers);
  const harness = await new Harness({
    broker: orchestratorBroker,
    ledgerConfig: { leaseTtlMs, backoffBaseMs: 100 },
    sweepIntervalMs: 100,
    ...store.harness,
  }).start();
  store.started?.(harness);
  const witnessDir = join(harness.dir.path, 'witness');
  mkdirSync(witnessDir);
  const gate = join(harness.dir.path, 'let-attempt-1-finish');
  try {
    const brokerA = await connect(viaProxy(proxy), brokers);
    const aConnection: Array<{ at: number; type: string }> = [];
    brokerA.onEvent((event) => aConnection.push({ at: Date.now(), type: event.type }));
    const a = await harness.startWorker(brokerA, {
      slots: 1,
      jobModules: [stubbornJobsModule],
      abortGraceMs: 60_000,
      timing: {
        heartbeatIntervalMs,
        controlTimeoutMs: 500,
        deadlineCheckIntervalMs: variant === 'local deadline' ? 50 : stalledTimerMs,
      },
    });
    const aEvents = timeline(a);
    const input: StubbornInput = { runLog: harness.runLog, witnessDir, ms: 200, hold: { attempt: 1, file: gate } };
    const { job } = await harness.orchestrator.submit({ tenant: 'acme', type: 'stubborn', input });

    const granted = await waitFor("A's lease", () => ofType(aEvents, 'lease_granted')[0]);
    assert.equal(granted.event.attempt, 1);
    const tokenA = granted.event.token;
    await waitFor("A's child to start attempt 1", () => harness.runs(job.id).length === 1);
    await waitFor("A's lease to be renewed", () => ofType(aEvents, 'heartbeat').some((e) => e.event.renewed === 1));
    // B exists only once A holds the lease, so the first delivery cannot go to B.
    const b = await harness.startWorker(await connect(rabbitMqUrl, brokers), { slots: 1, jobModules: [stubbornJobsModule] });
    const bEvents = timeline(b);

    const cutAt = Date.now();
    proxy.blackhole();

    if (variant === 'local deadline') {
      const lost = await waitFor("A's local deadline", () => ofType(aEvents, 'lease_lost')[0], 5000);
      assert.equal(lost.event.reason, 'local_deadline_passed');
      assert.ok(lost.at - cutAt <= leaseTtlMs, `A gave up ${lost.at - cutAt} ms after the cut, within one TTL`);
    }
    const bGranted = await waitFor("B's lease on attempt 2", () => ofType(bEvents, 'lease_granted')[0], 8000);
    assert.equal(bGranted.event.attempt, 2);
    const result = await waitFor('the result message', () => harness.resultsFor(job.id)[0], 8000);
    const resultAt = Date.now();
    // A is still running its attempt, cut off; its child has not finished.
    assert.equal(a.worker.runningJobs, 1, 'A still runs attempt 1');
    assert.equal(ofType(aEvents, 'job_done').length, 0);
    assert.equal(existsSync(witnessPath(witnessDir, job.id, 1)), false, "A's child has not finished yet");
    if (variant === 'local deadline') {
      // The local deadline invariant at work: A let go before the ledger gave the job to B.
      assert.ok(ofType(aEvents, 'lease_lost')[0]!.at < bGranted.at, 'A gave up its lease before B was granted attempt 2');
    }

    let healedAt: number;
    if (variant === 'fence on the local deadline') {
      writeFileSync(gate, ''); // A finishes late, still cut off
      await waitFor('A to finish attempt 1', () => ofType(aEvents, 'job_done')[0]);
      healedAt = Date.now();
      proxy.heal();
    } else {
      if (variant === 'heartbeat') {
        // A longer cut: both ends declare A's AMQP connection dead (1 s heartbeats), so A
        // comes back on a new connection rather than on the old one's held bytes.
        await waitFor("A's connection to be declared dead", () => aConnection.some((e) => e.type === 'connection_lost'), 8000);
      }
      healedAt = Date.now();
      proxy.heal();
      if (variant === 'heartbeat') {
        await waitFor('A to reconnect', () => aConnection.some((e) => e.type === 'connection_restored' && e.at > healedAt), 8000);
        const lost = await waitFor("A's heartbeat to learn the lease is lost", () => ofType(aEvents, 'lease_lost')[0], 8000);
        assert.equal(lost.event.reason, 'ended');
        assert.ok(lost.at > healedAt);
      }
      writeFileSync(gate, ''); // A finishes late, reconnected
      await waitFor('A to finish attempt 1', () => ofType(aEvents, 'job_done')[0]);
    }
    // A is back on the broker: a heartbeat of its own is answered again.
    await waitFor('an answered heartbeat from A after the heal', () => ofType(aEvents, 'heartbeat').some((e) => e.at > healedAt), 8000);

    // While cut off, none of A's heartbeats was answered.
    assert.deepEqual(
      ofType(aEvents, 'heartbeat').filter((e) => e.at > cutAt + heartbeatIntervalMs && e.at < healedAt),
      [],
      'no heartbeat of A was answered during the cut',
    );

    // A's child did finish, after B's result, with bytes of its own.
    const witnessA = readWitness(witnessPath(witnessDir, job.id, 1));
    const witnessB = readWitness(witnessPath(witnessDir, job.id, 2));
    assert.equal(witnessA.attempt, 1);
    assert.equal(witnessB.attempt, 2);
    assert.notEqual(witnessA.pid, witnessB.pid);
    assert.notEqual(witnessA.output, witnessB.output);
    assert.ok(ofType(aEvents, 'job_done')[0]!.at > resultAt, 'A finished after B');
    // Whether A told its child to stop (the child ignored it) depends on what A knew in time.
    assert.equal(witnessA.abortedBeforeFinish, variant !== 'fence on the local deadline');

    // What A's worker did with its late result: neither stored nor settled.
    const aFinal = aEvents.map((e) => e.event).filter((e) => e.type === 'abandoned' || e.type === 'fenced_out' || e.type === 'settle_refused');
    if (variant === 'fence on the local deadline') {
      assert.deepEqual(aFinal, [{ type: 'fenced_out', jobId: job.id, attempt: 1, reason: 'lease not live' }]);
      assert.equal(ofType(aEvents, 'lease_lost').length, 0, 'A never heard it lost the lease: its fence alone stopped it');
    } else {
      const reason = variant === 'local deadline' ? 'local_deadline_passed' : 'ended';
      assert.deepEqual(aFinal, [{ type: 'abandoned', jobId: job.id, attempt: 1, reason }]);
      assert.deepEqual(
        ofType(aEvents, 'lease_lost').map((e) => e.event.reason),
        [reason],
      );
    }
    assert.equal(ofType(aEvents, 'output_stored').length, 0, 'A stored no output');
    assert.equal(ofType(aEvents, 'settled').length, 0, 'A settled nothing');
    assert.equal(ofType(aEvents, 'lease_granted').length, 1);

    // Had A sent them anyway, the ledger refuses A's fence and settle: attempt 1 is over.
    const attempt1Location = store.locationOf(harness, job.id, 1);
    const asA = new ControlClient(brokerA, harness.topology, 2000);
    const lease = { jobId: job.id, attempt: 1, token: tokenA, tenant: 'acme' };
    assert.deepEqual(await asA.fence({ ...lease, ...store.staleFenceExtra?.(witnessA) }), {
      op: 'fence',
      jobId: job.id,
      attempt: 1,
      live: false,
      reason: 'ended',
    });
    assert.deepEqual(await asA.settle({ ...lease, outcome: { kind: 'finished', result: { outputs: { [stubbornOutputFile]: attempt1Location } } } }), {
      op: 'settle',
      jobId: job.id,
      attempt: 1,
      accepted: false,
      reason: 'ended',
    });

    // B's attempt is the one settled, stored and announced.
    assert.equal(ofType(bEvents, 'output_stored').length, 1);
    assert.deepEqual(
      ofType(bEvents, 'settled').map((e) => [e.event.attempt, e.event.state]),
      [[2, 'finished']],
    );
    await allResultsDelivered(harness, orchestratorBroker);
    assert.equal(harness.resultsFor(job.id).length, 1, 'one result message');
    assert.equal(result.messageId, job.id);
    assert.equal(result.routingKey, 'acme.stubborn.finished');
    assert.equal(result.body.attempt, 2);
    const attempt2Location = store.locationOf(harness, job.id, 2);
    assert.deepEqual(result.body.result?.outputs, { [stubbornOutputFile]: attempt2Location });
    const stored = await harness.ledger.getJob(job.id);
    assert.equal(stored?.state, 'finished');
    assert.equal(stored?.attempt, 2);
    assert.deepEqual(stored?.result?.outputs, { [stubbornOutputFile]: attempt2Location });
    assert.deepEqual(
      (await harness.ledger.getAttempts(job.id)).map((attempt) => [attempt.attempt, attempt.outcome]),
      [
        [1, 'expired'],
        [2, 'finished'],
      ],
    );
    assert.deepEqual(
      harness.runs(job.id).map((run) => run.attempt),
      [1, 2],
    );
    await store.check({ harness, job, result, bGranted, witnessA, witnessB });
  } finally {
    if (!existsSync(gate)) writeFileSync(gate, ''); // let a held child end, so the workers can stop
    proxy.heal();
    await harness.close();
    await Promise.all(brokers.map((broker) => broker.close().catch(() => undefined)));
    await proxy.close();
    await store.close?.();
  }
}

/** Waits until the outbox is empty, then for a marker published after it to come back. */
async function allResultsDelivered(harness: Harness, broker: Broker): Promise<void> {
  await waitFor('the outbox to drain', async () => (await harness.ledger.outboxStats()).unsent === 0);
  const marker = `marker-${randomBytes(4).toString('hex')}`;
  await broker.publish(harness.topology.resultsExchange, 'marker.marker.finished', Buffer.from(JSON.stringify({ id: marker })), { messageId: marker });
  await waitFor('the marker', () => harness.resultsFor(marker).length > 0);
}
