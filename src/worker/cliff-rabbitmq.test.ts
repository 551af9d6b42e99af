/**
 * The cliff (issue 3, test 1), on the real RabbitMQ with its consumer timeout lowered to
 * 3 s: a plain consumer that holds a 10 s job unacked is shown to loop (channel closed by
 * the broker, the job redelivered and started again, never finished), while planrun runs
 * the same 10 s job, at the same time on the same broker, exactly once.
 *
 * The timeout is global on RabbitMQ 3.10 (../shared/rabbitmq/consumer-timeout.sh) and
 * only channels opened after it is set use it, so every connection here is opened after
 * the call. It is set back to the default afterwards: in `after`, and, should the process
 * be interrupted or exit before that, from an exit/signal handler.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import amqp, { type Channel, type ChannelModel, type ConsumeMessage } from 'amqplib';
import type { Broker, BrokerEvent } from '../broker/broker.js';
import { RabbitMqBroker } from '../broker/rabbitmq.js';
import type { Job } from '../ledger/ledger.js';
import { Harness, type TestWorker } from '../../test/testing/harness.js';
import { rabbitMqUrl } from '../../test/testing/services.js';
import { waitFor } from '../../test/testing/wait.js';

const consumerTimeoutMs = 3000;
const jobMs = 10_000;

/** ../shared/rabbitmq/consumer-timeout.sh next to the repository, or where PLANRUN_CONSUMER_TIMEOUT_SCRIPT says. */
function consumerTimeoutScript(): string {
  const candidates = [
    process.env.PLANRUN_CONSUMER_TIMEOUT_SCRIPT,
    resolve(process.cwd(), '../shared/rabbitmq/consumer-timeout.sh'),
    '/work/shared/rabbitmq/consumer-timeout.sh',
  ];
  const found = candidates.find((path): path is string => path !== undefined && existsSync(path));
  if (!found) throw new Error(`consumer-timeout.sh not found (looked at ${candidates.filter(Boolean).join(', ')})`);
  return found;
}

function setConsumerTimeout(value: string): void {
  const run = spawnSync(consumerTimeoutScript(), [value], { encoding: 'utf8', timeout: 60_000 });
  if (run.status !== 0) throw new Error(`consumer-timeout.sh ${value} failed (${run.status ?? run.signal}): ${run.stderr || run.stdout}`);
}

/**
 * Lowers the consumer timeout until the returned restore runs. If the process ends first
 * (a crash, process.exit, SIGINT, SIGTERM), the timeout is restored on the way out.
 */
function lowerConsumerTimeout(ms: number): () => void {
  let restored = false;
  const restore = () => {
    if (restored) return;
    restored = true;
    process.off('exit', restore);
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    setConsumerTimeout('default');
  };
  function onSignal(signal: NodeJS.Signals): void {
    try {
      restore();
    } finally {
      process.exit(signal === 'SIGINT' ? 130 : 143);
    }
  }
  process.on('exit', restore);
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    setConsumerTimeout(String(ms));
  } catch (error) {
    restore();
    throw error;
  }
  return restore;
}

/**
 * The seed's consumer: prefetch 1, works while it holds the message unacked, acks at the
 * end. When the broker closes its channel it does what such consumers do: opens a new
 * channel and consumes again, so it gets the same message back and starts over.
 */
class PlainConsumer {
  readonly starts: Array<{ at: number; redelivered: boolean; body: string }> = [];
  readonly channelCloses: Array<{ at: number; reason: string | undefined }> = [];
  acked = 0;
  private stopped = false;
  private readonly timers = new Set<NodeJS.Timeout>();

  constructor(
    private readonly connection: ChannelModel,
    private readonly queue: string,
    private readonly workMs: number,
  ) {}

  async start(): Promise<void> {
    const channel = await this.connection.createChannel();
    let reason: string | undefined;
    channel.on('error', (error: Error) => (reason = error.message));
    channel.on('close', () => {
      if (this.stopped) return;
      this.channelCloses.push({ at: Date.now(), reason });
      this.start().catch(() => undefined); // restart, as a supervisor would
    });
    await channel.prefetch(1);
    await channel.consume(this.queue, (message) => message && this.work(channel, message), { noAck: false });
  }

  private work(channel: Channel, message: ConsumeMessage): void {
    this.starts.push({ at: Date.now(), redelivered: message.fields.redelivered, body: message.content.toString() });
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      try {
        channel.ack(message);
        this.acked++;
      } catch {
        // The channel is gone: the broker already took the message back.
      }
    }, this.workMs);
    this.timers.add(timer);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    await this.connection.close().catch(() => undefined);
  }
}

describe('the cliff: a job longer than the consumer timeout (RabbitMQ, consumer timeout 3 s)', () => {
  let restoreTimeout: (() => void) | undefined;
  const brokers: RabbitMqBroker[] = [];
  let harness: Harness | undefined;
  let orchestratorBroker: RabbitMqBroker;
  let worker: TestWorker;
  let job: Job;
  const brokerEvents: BrokerEvent[] = [];
  let submittedAt = 0;

  async function connect(): Promise<RabbitMqBroker> {
    const broker = await RabbitMqBroker.connect({ url: rabbitMqUrl, heartbeatSeconds: 2 });
    brokers.push(broker);
    broker.onEvent((event) => brokerEvents.push(event));
    return broker;
  }

  before(async () => {
    restoreTimeout = lowerConsumerTimeout(consumerTimeoutMs);
    // Every connection below is opened after the timeout was lowered, so it applies to them.
    orchestratorBroker = await connect();
    harness = await new Harness({ broker: orchestratorBroker, ledgerConfig: { leaseTtlMs: 2000 } }).start();
    worker = await harness.startWorker(await connect(), { slots: 1 });
    // planrun's 10 s job starts now and runs through the very window in which the plain
    // consumer below shows the cliff.
    submittedAt = Date.now();
    ({ job } = await harness.orchestrator.submit({ tenant: 'acme', type: 'probe', input: { ms: jobMs, runLog: harness.runLog } }));
  });

  after(async () => {
    try {
      await harness?.close();
      await Promise.all(brokers.map((broker) => broker.close().catch(() => undefined)));
    } finally {
      restoreTimeout?.();
    }
  });

  it('a plain consumer holding a 10 s job unacked loops: channel closed, job redelivered and restarted, never finished', async () => {
    const queue = `cliff-${randomBytes(4).toString('hex')}`;
    const connection = await amqp.connect(rabbitMqUrl);
    connection.on('error', () => undefined);
    const consumer = new PlainConsumer(connection, queue, jobMs);
    try {
      const setup = await connection.createChannel();
      await setup.assertQueue(queue, { durable: false, exclusive: true });
      setup.sendToQueue(queue, Buffer.from('render the 10 s video'), { persistent: true });
      await setup.close();
      await consumer.start();

      // Starts at ~0 s, ~3-4 s, ~6-8 s: the third start comes before the first could have finished.
      await waitFor('the job to be started a third time', () => consumer.starts.length >= 3, 14_000);
      const { starts, channelCloses } = consumer;
      const first = starts[0]!;

      assert.equal(consumer.acked, 0, 'the 10 s job never got to finish and ack');
      assert.equal(first.redelivered, false);
      for (const start of starts.slice(1)) {
        assert.equal(start.redelivered, true, 'each restart is the same message, redelivered');
        assert.equal(start.body, first.body);
      }
      assert.ok(channelCloses.length >= 2, `the broker closed the consumer's channel ${channelCloses.length} times`);
      for (const close of channelCloses) {
        assert.match(close.reason ?? '', /PRECONDITION_FAILED/);
        assert.match(close.reason ?? '', /delivery acknowledgement .* timed out/i);
      }
      for (let i = 1; i < starts.length; i++) {
        const gap = starts[i]!.at - starts[i - 1]!.at;
        // The broker checks once per channel tick (1 s): each start lasts the timeout, up to a tick more.
        assert.ok(gap >= consumerTimeoutMs - 100 && gap < consumerTimeoutMs + 2500, `start ${i + 1} came ${gap} ms after start ${i}`);
      }
      assert.ok(starts[2]!.at - first.at < jobMs, 'restarted twice within the time the job needs once');
    } finally {
      await consumer.stop();
    }
  });

  it('planrun runs the same 10 s job exactly once: one run, one settle, one result message, attempt 1', async () => {
    assert.ok(harness);
    const result = await waitFor('the result message', () => harness!.resultsFor(job.id)[0], jobMs + 10_000);
    // Every result published has been confirmed by the broker once the outbox is empty; a
    // marker published after that arrives after all of them.
    await allResultsDelivered(harness, orchestratorBroker);

    assert.equal(result.routingKey, 'acme.probe.finished');
    assert.equal(result.messageId, job.id);
    assert.equal(result.body.state, 'finished');
    assert.equal(result.body.attempt, 1);
    assert.equal(harness.resultsFor(job.id).length, 1, 'one result message');

    assert.deepEqual(
      harness.runs(job.id).map((run) => run.attempt),
      [1],
      'one run',
    );
    const settled = await waitFor('the settle reply', () => worker.events.filter((e) => e.type === 'settled'));
    assert.deepEqual(
      settled.map((e) => e.type === 'settled' && { jobId: e.jobId, attempt: e.attempt, state: e.state }),
      [{ jobId: job.id, attempt: 1, state: 'finished' }],
      'one accepted settle',
    );
    assert.equal(worker.events.filter((e) => e.type === 'lease_granted').length, 1);
    assert.equal(worker.events.filter((e) => e.type === 'lease_lost' || e.type === 'settle_refused').length, 0);

    const attempts = await harness.ledger.getAttempts(job.id);
    assert.equal(attempts.length, 1);
    assert.equal(attempts[0]!.outcome, 'finished');
    const ran = attempts[0]!.endedAt! - attempts[0]!.startedAt;
    assert.ok(ran >= jobMs, `the job really ran ${ran} ms, over three consumer timeouts`);
    assert.ok(Date.now() - submittedAt >= jobMs);
    // No planrun channel was closed by the broker while the job ran: ack-early holds nothing.
    assert.deepEqual(
      brokerEvents.filter((e) => e.type === 'consumer_interrupted' || e.type === 'connection_lost'),
      [],
    );
  });
});

/** Waits until the outbox is empty, then for a marker published after it to come back. */
async function allResultsDelivered(harness: Harness, broker: Broker): Promise<void> {
  await waitFor('the outbox to drain', async () => (await harness.ledger.outboxStats()).unsent === 0);
  const marker = `marker-${randomBytes(4).toString('hex')}`;
  await broker.publish(harness.topology.resultsExchange, 'marker.marker.finished', Buffer.from(JSON.stringify({ id: marker })), {
    messageId: marker,
  });
  await waitFor('the marker', () => harness.resultsFor(marker).length > 0);
}
