/**
 * The network blip (issue 11, first test) with the S3 store: as in
 * network-blip-rabbitmq.test.ts, worker A reaches the broker through a TCP proxy, worker B
 * and the orchestrator directly; A leases the job, its cable is cut past its TTL, B takes
 * attempt 2 over and delivers, and A's child finishes late. Here the orchestrator keeps
 * outputs in an S3-protocol server (s3rver, in this process on a free port), so the fence
 * is the upload permission: a live fence answer carries presigned PUT URLs for that
 * attempt's keys, a refused one carries none.
 *
 * Asserted on what the orchestrator signed (every presignUploads call, recorded) and on
 * every fence answer it gave (its control handler, wrapped): A is never handed an upload
 * URL for attempt 1, not while cut off, not once healed, not when it asks outright after
 * its lease ended; the only URL signed is B's, for attempt 2's key, after B's grant. In the
 * bucket, the job's prefix holds attempt 2's object alone, with B's bytes, never A's; the
 * result and the ledger name that s3:// location; the worker's folder store is untouched.
 * The three ways a late worker finds out it lost are the three variants of the original.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import type { Broker } from '../broker/broker.js';
import type { ControlHandler } from '../orchestrator/control-handler.js';
import type { AttemptRef, OutputUpload } from '../orchestrator/object-store.js';
import type { ControlReply, ControlRequest, FenceReply } from '../control/protocol.js';
import { RabbitMqBroker } from '../broker/rabbitmq.js';
import { Harness, type TestWorker } from '../../test/testing/harness.js';
import { rabbitMqUrl } from '../../test/testing/services.js';
import { FaultProxy } from '../../test/testing/fault-proxy.js';
import { startS3Server, testS3Credentials } from '../../test/testing/s3-server.js';
import { waitFor } from '../../test/testing/wait.js';
import { ControlClient } from './control-client.js';
import { stubbornOutputFile, witnessPath, type StubbornInput, type StubbornWitness } from '../../test/worker/fixtures/stubborn-jobs.js';
import type { WorkerEvent } from './worker-events.js';

const stubbornJobsModule = fileURLToPath(new URL('../../test/worker/fixtures/stubborn-jobs.js', import.meta.url));

const leaseTtlMs = 1500;
const heartbeatIntervalMs = 300;
const stalledTimerMs = 3_600_000;

type Variant = 'local deadline' | 'fence on the local deadline' | 'heartbeat';

interface Timed {
  at: number;
  event: WorkerEvent;
}

function timeline(worker: TestWorker): Timed[] {
  const events: Timed[] = [];
  worker.worker.onEvent((event) => events.push({ at: Date.now(), event }));
  return events;
}

function ofType<T extends WorkerEvent['type']>(events: Timed[], type: T): Array<{ at: number; event: Extract<WorkerEvent, { type: T }> }> {
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

interface Signed {
  at: number;
  ref: AttemptRef;
  names: string[];
  urls: string[];
}

interface Answered {
  at: number;
  request: ControlRequest;
  reply: ControlReply;
}

async function networkBlip(variant: Variant): Promise<void> {
  const brokers: Broker[] = [];
  const s3 = await startS3Server();
  const store = s3.store('blip');
  // What the orchestrator signed: every presigned upload, with the attempt it was for.
  const signed: Signed[] = [];
  const presignUploads = store.presignUploads.bind(store);
  store.presignUploads = async (ref, outputs, expiresInMs): Promise<OutputUpload[]> => {
    const uploads = await presignUploads(ref, outputs, expiresInMs);
    signed.push({ at: Date.now(), ref: { ...ref }, names: outputs.map((o) => o.name), urls: uploads.map((u) => u.url) });
    return uploads;
  };
  const proxy = await FaultProxy.start({ port: Number(new URL(rabbitMqUrl).port || 5672), host: new URL(rabbitMqUrl).hostname });
  const orchestratorBroker = await connect(rabbitMqUrl, brokers);
  const harness = await new Harness({
    broker: orchestratorBroker,
    ledgerConfig: { leaseTtlMs, backoffBaseMs: 100 },
    sweepIntervalMs: 100,
    objectStore: store,
  }).start();
  // Every fence answer the orchestrator gave, as it went out.
  const answered: Answered[] = [];
  const control = (harness.orchestrator as unknown as { control: ControlHandler }).control;
  const handle = control.handle.bind(control);
  control.handle = async (raw) => {
    const reply = await handle(raw);
    const request = raw as ControlRequest;
    if (request.op === 'fence') answered.push({ at: Date.now(), request, reply: reply as ControlReply });
    return reply;
  };
  const reader = new S3Client({ endpoint: s3.endpoint, forcePathStyle: true, region: 'us-east-1', credentials: testS3Credentials });
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

    // Had A sent them anyway, the ledger refuses A's fence and settle: attempt 1 is over,
    // and a fence asking for upload URLs outright gets none.
    const keyOf = (attempt: number) => store.keyOf({ tenant: 'acme', jobId: job.id, attempt }, stubbornOutputFile);
    const attempt1Location = store.locationOf(keyOf(1));
    const asA = new ControlClient(brokerA, harness.topology, 2000);
    const lease = { jobId: job.id, attempt: 1, token: tokenA, tenant: 'acme' };
    assert.deepEqual(await asA.fence({ ...lease, outputs: [{ name: stubbornOutputFile, bytes: witnessA.output.length }] }), {
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
    const attempt2Location = store.locationOf(keyOf(2));
    assert.equal(attempt2Location, `s3://${s3.bucket}/blip/acme/${job.id}/2/${stubbornOutputFile}`);
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

    // What the orchestrator signed: one upload, for attempt 2's key, after B's grant; never
    // anything for attempt 1 (A never had a live fence, before or after its lease ended).
    assert.deepEqual(
      signed.map((s) => [s.ref.attempt, s.names]),
      [[2, [stubbornOutputFile]]],
      'the only upload URL signed is B’s',
    );
    assert.ok(signed[0]!.at >= bGranted.at, 'signed after B was granted attempt 2');
    assert.match(new URL(signed[0]!.urls[0]!).pathname, new RegExp(`/2/${stubbornOutputFile.replace('.', '\\.')}$`));
    // Every fence answer: those for attempt 1 refused, with no URL; only attempt 2's carry one.
    const fences = answered.map((a) => ({ request: a.request as Extract<ControlRequest, { op: 'fence' }>, reply: a.reply as FenceReply }));
    assert.ok(
      fences.some((f) => f.request.attempt === 1),
      'A’s outright fence was answered',
    );
    for (const { reply } of fences.filter((f) => f.request.attempt === 1)) {
      assert.equal(reply.live, false, `a fence of attempt 1 answered ${JSON.stringify(reply)}`);
      assert.equal('uploads' in reply, false, 'no upload URL for attempt 1');
    }
    assert.deepEqual(
      fences.filter((f) => f.reply.live && f.reply.uploads).map((f) => [f.request.attempt, f.reply.live && f.reply.uploads?.map((u) => u.location)]),
      [[2, [attempt2Location]]],
    );

    // Nothing of A's in the bucket: the job's prefix holds attempt 2's object alone, with B's bytes.
    const listed = await reader.send(new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: `blip/acme/${job.id}/` }));
    assert.deepEqual(
      (listed.Contents ?? []).map((o) => o.Key),
      [keyOf(2)],
    );
    const object = await reader.send(new GetObjectCommand({ Bucket: s3.bucket, Key: keyOf(2) }));
    const bytes = Buffer.from(await object.Body!.transformToByteArray());
    assert.deepEqual(bytes, Buffer.from(witnessB.output), "the stored bytes are B's");
    assert.notDeepEqual(bytes, Buffer.from(witnessA.output));
    assert.equal(existsSync(harness.outputRoot), false, 'nothing in a folder store');
    assert.deepEqual(
      harness.runs(job.id).map((run) => run.attempt),
      [1, 2],
    );
  } finally {
    if (!existsSync(gate)) writeFileSync(gate, ''); // let a held child end, so the workers can stop
    proxy.heal();
    await harness.close();
    await Promise.all(brokers.map((broker) => broker.close().catch(() => undefined)));
    await proxy.close();
    reader.destroy();
    await s3.stop();
  }
}

/** Waits until the outbox is empty, then for a marker published after it to come back. */
async function allResultsDelivered(harness: Harness, broker: Broker): Promise<void> {
  await waitFor('the outbox to drain', async () => (await harness.ledger.outboxStats()).unsent === 0);
  const marker = `marker-${randomBytes(4).toString('hex')}`;
  await broker.publish(harness.topology.resultsExchange, 'marker.marker.finished', Buffer.from(JSON.stringify({ id: marker })), { messageId: marker });
  await waitFor('the marker', () => harness.resultsFor(marker).length > 0);
}

describe('a network blip with the S3 store: A is cut off, B runs attempt 2 and uploads, A finishes late (RabbitMQ)', () => {
  it("A's local deadline passes while it is cut off; it abandons its late result", () => networkBlip('local deadline'));
  it("A's deadline timer is stalled; it finishes while cut off and its fence trusts the passed local deadline", () =>
    networkBlip('fence on the local deadline'));
  it("A's deadline timer is stalled; healed, its heartbeat learns the job ended; it abandons its late result", () => networkBlip('heartbeat'));
});
