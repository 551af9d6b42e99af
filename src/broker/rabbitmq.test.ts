import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import amqp, { type ChannelModel } from 'amqplib';
import { rabbitMqUrl } from '../../test/testing/services.js';
import { FaultProxy } from '../../test/testing/fault-proxy.js';
import { isBrokerError, type Broker, type BrokerEvent } from './broker.js';
import { brokerConformance } from '../../test/broker/conformance.js';
import { RabbitMqBroker, type RabbitMqOptions } from './rabbitmq.js';
import { eventually, Inbox, quietMs, uniqueName } from '../../test/broker/testkit.js';

const rabbitUrl = rabbitMqUrl;
const rabbitPort = Number(new URL(rabbitUrl).port || 5672);

/** Short intervals, so that losing and regaining a connection takes a few seconds, not minutes. */
const fastRecovery: Omit<RabbitMqOptions, 'url'> = {
  heartbeatSeconds: 1,
  connectTimeoutMs: 1000,
  retry: { initialMs: 50, maxMs: 400 },
};

brokerConformance('RabbitMQ', async () => {
  const opened: Broker[] = [];
  return {
    async connect() {
      const broker = await RabbitMqBroker.connect({ url: rabbitUrl, ...fastRecovery });
      opened.push(broker);
      return broker;
    },
    async close() {
      await Promise.all(opened.map((broker) => broker.close()));
    },
  };
});

describe('RabbitMqBroker', () => {
  /** A plain amqplib connection, to look at and tamper with what the broker under test did. */
  let admin: ChannelModel;
  const queues: string[] = [];
  const exchanges: string[] = [];

  before(async () => {
    admin = await amqp.connect(rabbitUrl);
  });

  after(async () => {
    const channel = await admin.createChannel();
    for (const queue of queues) await channel.deleteQueue(queue);
    for (const exchange of exchanges) await channel.deleteExchange(exchange);
    await admin.close();
  });

  function queueName(prefix: string): string {
    const name = uniqueName(prefix);
    queues.push(name);
    return name;
  }

  function exchangeName(prefix: string): string {
    const name = uniqueName(prefix);
    exchanges.push(name);
    return name;
  }

  /** Runs `operation` on a channel of its own and returns its error, if the broker refused it. */
  async function refusal(operation: (channel: amqp.Channel) => Promise<unknown>): Promise<unknown> {
    const channel = await admin.createChannel();
    channel.on('error', () => undefined);
    try {
      await operation(channel);
      await channel.close();
      return undefined;
    } catch (error) {
      return error;
    }
  }

  /** Deletes a queue behind the back of the broker under test. */
  async function deleteQueueDirectly(queue: string): Promise<void> {
    const channel = await admin.createChannel();
    await channel.deleteQueue(queue);
    await channel.close();
  }

  function recordEvents(broker: Broker): BrokerEvent[] {
    const events: BrokerEvent[] = [];
    broker.onEvent((event) => events.push(event));
    return events;
  }

  function count(events: BrokerEvent[], type: BrokerEvent['type']): number {
    return events.filter((event) => event.type === type).length;
  }

  it('declares durable queues and exchanges and publishes persistent messages', async () => {
    const broker = await RabbitMqBroker.connect({ url: rabbitUrl });
    try {
      const queue = queueName('durable');
      const exchange = exchangeName('durable');
      await broker.declareQueue(queue);
      await broker.declareTopicExchange(exchange);
      await broker.sendToQueue(queue, Buffer.from('x'), { messageId: 'm1' });

      const channel = await admin.createChannel();
      const message = await channel.get(queue, { noAck: true });
      await channel.close();
      assert.ok(message);
      assert.equal(message.properties.deliveryMode, 2, 'persistent');
      // Redeclaring with different durability is refused: they are durable.
      const queueRefusal = await refusal((c) => c.assertQueue(queue, { durable: false }));
      assert.equal((queueRefusal as { code?: number }).code, 406);
      const exchangeRefusal = await refusal((c) => c.assertExchange(exchange, 'topic', { durable: false }));
      assert.equal((exchangeRefusal as { code?: number }).code, 406);
    } finally {
      await broker.close();
    }
  });

  it('a reply to a direct reply-to address is confirmed, not refused as unroutable: delivered to a live requester, dropped for a gone one', async () => {
    const broker = await RabbitMqBroker.connect({ url: rabbitUrl });
    try {
      const queue = queueName('requests');
      await broker.declareQueue(queue);
      const requests = new Inbox(true);
      await broker.consume(queue, requests.handler, { prefetch: 10 });

      // A requester of its own, as a worker is: it listens on direct reply-to and asks twice.
      const requester = await admin.createChannel();
      const replies: string[] = [];
      await requester.consume('amq.rabbitmq.reply-to', (message) => message && replies.push(message.content.toString()), { noAck: true });
      for (const n of [1, 2]) requester.sendToQueue(queue, Buffer.from(`q${n}`), { replyTo: 'amq.rabbitmq.reply-to', correlationId: `c${n}` });
      const [first, second] = await requests.waitFor(2);
      assert.ok(first!.replyTo?.startsWith('amq.rabbitmq.reply-to.'), first!.replyTo);

      // RabbitMQ returns a mandatory publish to such an address even when it delivers it.
      await broker.sendToQueue(first!.replyTo!, Buffer.from('r1'), { correlationId: first!.correlationId });
      await eventually(
        () => `the reply (got ${replies.join(',') || 'none'})`,
        () => replies.includes('r1'),
      );

      await requester.close();
      await broker.sendToQueue(second!.replyTo!, Buffer.from('r2'), { correlationId: second!.correlationId });
      assert.deepEqual(replies, ['r1'], 'the gone requester’s reply went nowhere');
    } finally {
      await broker.close();
    }
  });

  it('a publish to a missing exchange fails alone with not_found; those caught with it fail retryably', async () => {
    const broker = await RabbitMqBroker.connect({ url: rabbitUrl });
    try {
      const queue = queueName('bystander');
      await broker.declareQueue(queue);
      const bystanders = Array.from({ length: 20 }, (_, i) => broker.sendToQueue(queue, Buffer.from(String(i))));
      const culprit = broker.publish(uniqueName('missing'), 'a.b', Buffer.from('x'));
      await assert.rejects(culprit, (error: unknown) => isBrokerError(error, 'not_found'));
      for (const outcome of await Promise.allSettled(bystanders)) {
        if (outcome.status === 'rejected') assert.ok(isBrokerError(outcome.reason, 'disconnected'), String(outcome.reason));
      }
      await broker.sendToQueue(queue, Buffer.from('after'));
    } finally {
      await broker.close();
    }
  });

  it('fails fast when RabbitMQ cannot be reached', async () => {
    const proxy = await FaultProxy.start({ port: rabbitPort });
    const port = proxy.port;
    await proxy.close();
    const started = Date.now();
    await assert.rejects(RabbitMqBroker.connect({ url: `amqp://guest:guest@127.0.0.1:${port}` }), (error: unknown) => isBrokerError(error, 'disconnected'));
    assert.ok(Date.now() - started < 2000);
  });

  it('restarts a consumer whose queue was deleted under it once the queue is back', async () => {
    const broker = await RabbitMqBroker.connect({ url: rabbitUrl, ...fastRecovery });
    try {
      const events = recordEvents(broker);
      const queue = queueName('deleted');
      await broker.declareQueue(queue);
      const inbox = new Inbox(true);
      await broker.consume(queue, inbox.handler, { prefetch: 1 });

      // The broker cancels the consumer; consuming again fails (404 closes the channel) until the queue exists.
      await deleteQueueDirectly(queue);
      await eventually('repeated interruptions', () => count(events, 'consumer_interrupted') >= 2);

      await broker.declareQueue(queue);
      await broker.sendToQueue(queue, Buffer.from('back'));
      await inbox.waitFor(1);
    } finally {
      await broker.close();
    }
  });

  describe('through a faulty network', () => {
    let proxy: FaultProxy;

    before(async () => {
      proxy = await FaultProxy.start({ port: rabbitPort });
    });

    after(async () => {
      await proxy.close();
    });

    function connectThroughProxy(): Promise<RabbitMqBroker> {
      proxy.heal();
      return RabbitMqBroker.connect({ url: `amqp://guest:guest@127.0.0.1:${proxy.port}`, ...fastRecovery });
    }

    it('after a reset, reconnects, redelivers what was unacknowledged and keeps paused consumers paused', async () => {
      const broker = await connectThroughProxy();
      try {
        const events = recordEvents(broker);
        const active = queueName('active');
        const paused = queueName('paused');
        await broker.declareQueue(active);
        await broker.declareQueue(paused);
        const activeInbox = new Inbox(false);
        const pausedInbox = new Inbox(true);
        await broker.consume(active, activeInbox.handler, { prefetch: 5 });
        const pausedSubscription = await broker.consume(paused, pausedInbox.handler, { prefetch: 5 });
        await pausedSubscription.pause();
        await broker.sendToQueue(active, Buffer.from('held'), { messageId: 'held' });
        const [held] = await activeInbox.waitFor(1);

        proxy.reset();
        await eventually('connection_restored', () => count(events, 'connection_restored') === 1);
        assert.equal(count(events, 'connection_lost'), 1);

        const [, redelivered] = await activeInbox.waitFor(2);
        assert.equal(redelivered!.messageId, 'held');
        assert.equal(redelivered!.redelivered, true);
        held!.ack(); // from the lost channel: ignored
        redelivered!.ack();

        await broker.sendToQueue(paused, Buffer.from('waits'));
        await new Promise((resolve) => setTimeout(resolve, quietMs));
        assert.equal(pausedInbox.deliveries.length, 0, 'a paused consumer stays paused after reconnecting');
        await pausedSubscription.resume();
        await pausedInbox.waitFor(1);
        assert.equal(count(events, 'consumer_interrupted'), 0);
      } finally {
        await broker.close();
      }
    });

    it('when the network goes silent, fails what is in flight, then reconnects and re-declares what the broker accepts', async () => {
      const broker = await connectThroughProxy();
      try {
        const events = recordEvents(broker);
        const exchange = exchangeName('results');
        const queue = queueName('bound');
        await broker.declareTopicExchange(exchange);
        await broker.declareQueue(queue);
        await broker.bindQueue(queue, exchange, 'tenant.#');
        // Also bound to an exchange someone else declared, and will delete.
        const foreign = exchangeName('foreign');
        const adminChannel = await admin.createChannel();
        await adminChannel.assertExchange(foreign, 'topic', { durable: true });
        await broker.bindQueue(queue, foreign, '#');
        const inbox = new Inbox(true);
        await broker.consume(queue, inbox.handler, { prefetch: 5 });

        proxy.blackhole();
        const inFlight = broker.publish(exchange, 'tenant.render.finished', Buffer.from('lost?'));
        const request = broker.request(queue, Buffer.from('x'), { timeoutMs: 30_000 });
        // Meanwhile the queue disappears at the broker (as if it had restarted without it),
        // and so does the foreign exchange, for good.
        await deleteQueueDirectly(queue);
        await adminChannel.deleteExchange(foreign);
        await adminChannel.close();

        await assert.rejects(inFlight, (error: unknown) => isBrokerError(error, 'disconnected'));
        await assert.rejects(request, (error: unknown) => isBrokerError(error, 'disconnected'));
        assert.equal(count(events, 'connection_lost'), 1);
        await assert.rejects(broker.sendToQueue(queue, Buffer.from('x')), (error: unknown) => isBrokerError(error, 'disconnected'));

        proxy.heal();
        await eventually('connection_restored', () => count(events, 'connection_restored') === 1);
        const refused = events.flatMap((event) => (event.type === 'redeclare_refused' ? [event.what] : []));
        assert.deepEqual(refused, [`binding of ${queue} to ${foreign} (#)`]);
        await broker.publish(exchange, 'tenant.render.finished', Buffer.from('after'));
        const [delivery] = await inbox.waitFor(1);
        assert.equal(delivery!.body.toString(), 'after');
        assert.equal(delivery!.routingKey, 'tenant.render.finished');
      } finally {
        await broker.close();
      }
    });
  });
});
