/**
 * The behaviour every Broker implementation must show, as one suite run against each
 * (`embedded.test.ts`, `rabbitmq.test.ts`). Each test gets its own fixture and its own
 * uniquely named queues and exchanges, deleted afterwards.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isBrokerError, type Broker, type BrokerErrorCode, type BrokerEvent, type IncomingRequest } from '../../src/broker/broker.js';
import { eventually, Inbox, quietMs, sleep, uniqueName } from './testkit.js';

export interface BrokerFixture {
  /** Opens another connection to the broker under test. */
  connect(): Promise<Broker>;
  /** Releases what the fixture holds (for an in-process broker, the broker itself). */
  close(): Promise<void>;
}

/** What one test works with: connections and names that are cleaned up after it. */
class TestBed {
  private readonly brokers: Broker[] = [];
  private readonly queues: string[] = [];
  private readonly exchanges: string[] = [];

  constructor(private readonly fixture: BrokerFixture) {}

  async connect(): Promise<Broker> {
    const broker = await this.fixture.connect();
    this.brokers.push(broker);
    return broker;
  }

  async queue(broker: Broker, prefix = 'queue'): Promise<string> {
    const name = uniqueName(prefix);
    this.queues.push(name);
    await broker.declareQueue(name);
    return name;
  }

  async exchange(broker: Broker, prefix = 'exchange'): Promise<string> {
    const name = uniqueName(prefix);
    this.exchanges.push(name);
    await broker.declareTopicExchange(name);
    return name;
  }

  async tearDown(): Promise<void> {
    try {
      await Promise.all(this.brokers.map((broker) => broker.close()));
      const cleaner = await this.fixture.connect();
      for (const queue of this.queues) await cleaner.deleteQueue(queue);
      for (const exchange of this.exchanges) await cleaner.deleteExchange(exchange);
      await cleaner.close();
    } finally {
      await this.fixture.close();
    }
  }
}

async function assertRejectsWith(promise: Promise<unknown>, code: BrokerErrorCode): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(isBrokerError(error, code), `expected a BrokerError with code ${code}, got ${String(error)}`);
    return true;
  });
}

function body(text: string): Buffer {
  return Buffer.from(text);
}

export function brokerConformance(name: string, createFixture: () => Promise<BrokerFixture>): void {
  function test(title: string, run: (bed: TestBed) => Promise<void>): void {
    it(title, async () => {
      const bed = new TestBed(await createFixture());
      try {
        await run(bed);
      } finally {
        await bed.tearDown();
      }
    });
  }

  describe(`Broker conformance: ${name}`, () => {
    describe('publish and consume', () => {
      test('a message arrives with its body, message id, headers and routing key', async (bed) => {
        const broker = await bed.connect();
        const queue = await bed.queue(broker);
        const inbox = new Inbox(true);
        await broker.consume(queue, inbox.handler, { prefetch: 10 });

        await broker.sendToQueue(queue, body('hello'), {
          messageId: 'job-1',
          headers: { tenant: 't1', attempt: 2, urgent: true },
        });

        const [delivery] = await inbox.waitFor(1);
        assert.equal(delivery!.body.toString(), 'hello');
        assert.equal(delivery!.messageId, 'job-1');
        assert.deepEqual({ ...delivery!.headers }, { tenant: 't1', attempt: 2, urgent: true });
        assert.equal(delivery!.routingKey, queue);
        assert.equal(delivery!.redelivered, false);
        assert.equal(delivery!.replyTo, undefined);
      });

      test('a confirmed publish is in the queue for another connection to consume', async (bed) => {
        const publisher = await bed.connect();
        const queue = await bed.queue(publisher);
        await publisher.sendToQueue(queue, body('kept'), { messageId: 'm1' });
        await publisher.close();

        const consumer = await bed.connect();
        const inbox = new Inbox(true);
        await consumer.consume(queue, inbox.handler, { prefetch: 1 });
        const [delivery] = await inbox.waitFor(1);
        assert.equal(delivery!.messageId, 'm1');
      });

      test('publishing where nothing can take the message is refused, and the broker stays usable', async (bed) => {
        const broker = await bed.connect();
        await assertRejectsWith(broker.sendToQueue(uniqueName('missing'), body('x')), 'unroutable');
        await assertRejectsWith(broker.publish(uniqueName('missing'), 'a.b', body('x')), 'not_found');
        await assertRejectsWith(
          broker.consume(uniqueName('missing'), () => undefined, { prefetch: 1 }),
          'not_found',
        );

        const queue = await bed.queue(broker);
        await broker.sendToQueue(queue, body('still works'));
        const inbox = new Inbox(true);
        await broker.consume(queue, inbox.handler, { prefetch: 1 });
        await inbox.waitFor(1);
      });
    });

    describe('redelivery', () => {
      test('nack with requeue redelivers the message with redelivered set; nack without drops it', async (bed) => {
        const broker = await bed.connect();
        const queue = await bed.queue(broker);
        const inbox = new Inbox(false);
        await broker.consume(queue, inbox.handler, { prefetch: 1 });

        await broker.sendToQueue(queue, body('again'), { messageId: 'm1', headers: { tenant: 't1' } });
        const [first] = await inbox.waitFor(1);
        first!.nack({ requeue: true });
        const [, second] = await inbox.waitFor(2);
        assert.equal(second!.messageId, 'm1');
        assert.equal(second!.headers.tenant, 't1');
        assert.equal(second!.redelivered, true);
        second!.nack({ requeue: false });

        await sleep(quietMs);
        assert.equal(inbox.deliveries.length, 2, 'a message nacked without requeue must not come back');
      });

      test("a cancelled consumer's unacknowledged messages go to the next consumer", async (bed) => {
        const first = await bed.connect();
        const second = await bed.connect();
        const queue = await bed.queue(first);
        const firstInbox = new Inbox(false);
        const firstSubscription = await first.consume(queue, firstInbox.handler, { prefetch: 2 });
        await first.sendToQueue(queue, body('a'), { messageId: 'a' });
        await first.sendToQueue(queue, body('b'), { messageId: 'b' });
        await firstInbox.waitFor(2);

        const secondInbox = new Inbox(true);
        await second.consume(queue, secondInbox.handler, { prefetch: 10 });
        await sleep(quietMs);
        assert.equal(secondInbox.deliveries.length, 0, 'held messages are not given to another consumer');

        await firstSubscription.cancel();
        const redelivered = await secondInbox.waitFor(2);
        assert.deepEqual(redelivered.map((delivery) => delivery.messageId).sort(), ['a', 'b']);
        assert.ok(redelivered.every((delivery) => delivery.redelivered));
        for (const late of firstInbox.deliveries) late.ack(); // too late: ignored, not an error
      });

      test('closing a connection requeues its unacknowledged messages', async (bed) => {
        const first = await bed.connect();
        const queue = await bed.queue(first);
        const firstInbox = new Inbox(false);
        await first.consume(queue, firstInbox.handler, { prefetch: 1 });
        await first.sendToQueue(queue, body('held'), { messageId: 'held' });
        await firstInbox.waitFor(1);
        await first.close();

        const second = await bed.connect();
        const secondInbox = new Inbox(true);
        await second.consume(queue, secondInbox.handler, { prefetch: 1 });
        const [delivery] = await secondInbox.waitFor(1);
        assert.equal(delivery!.messageId, 'held');
        assert.equal(delivery!.redelivered, true);
      });

      test('a handler that throws gets its delivery redelivered, and the failure is reported', async (bed) => {
        const broker = await bed.connect();
        const queue = await bed.queue(broker);
        const events: BrokerEvent[] = [];
        broker.onEvent((event) => events.push(event));
        const seen: boolean[] = [];
        await broker.consume(
          queue,
          (delivery) => {
            seen.push(delivery.redelivered);
            if (!delivery.redelivered) throw new Error('handler bug');
            delivery.ack();
          },
          { prefetch: 1 },
        );
        await broker.sendToQueue(queue, body('x'));

        await eventually('the redelivery', () => seen.length >= 2);
        assert.deepEqual(seen, [false, true]);
        const failure = events.find((event) => event.type === 'handler_failed');
        assert.ok(failure && failure.type === 'handler_failed' && failure.queue === queue);
      });

      test('settling a delivery twice is harmless', async (bed) => {
        const broker = await bed.connect();
        const queue = await bed.queue(broker);
        const events: BrokerEvent[] = [];
        broker.onEvent((event) => events.push(event));
        const inbox = new Inbox(false);
        await broker.consume(queue, inbox.handler, { prefetch: 1 });

        await broker.sendToQueue(queue, body('1'));
        const [first] = await inbox.waitFor(1);
        first!.ack();
        first!.ack();
        first!.nack({ requeue: true });
        await broker.sendToQueue(queue, body('2'));
        const [, second] = await inbox.waitFor(2);
        second!.ack();

        await sleep(quietMs);
        assert.deepEqual(inbox.bodies, ['1', '2']);
        assert.deepEqual(events, []);
      });
    });

    describe('flow control', () => {
      test('prefetch bounds the unacknowledged deliveries a consumer holds', async (bed) => {
        const broker = await bed.connect();
        const queue = await bed.queue(broker);
        for (let i = 1; i <= 5; i++) await broker.sendToQueue(queue, body(String(i)));
        const inbox = new Inbox(false);
        await broker.consume(queue, inbox.handler, { prefetch: 2 });

        await inbox.waitFor(2);
        await sleep(quietMs);
        assert.equal(inbox.deliveries.length, 2);

        inbox.deliveries[0]!.ack();
        await inbox.waitFor(3);
        await sleep(quietMs);
        assert.deepEqual(inbox.bodies, ['1', '2', '3']);
      });

      test('pause stops deliveries, held ones stay ackable, and resume restarts them', async (bed) => {
        const broker = await bed.connect();
        const queue = await bed.queue(broker);
        const inbox = new Inbox(false);
        const subscription = await broker.consume(queue, inbox.handler, { prefetch: 5 });

        await broker.sendToQueue(queue, body('before'));
        const [held] = await inbox.waitFor(1);
        await subscription.pause();
        held!.ack();
        await broker.sendToQueue(queue, body('during'));
        await sleep(quietMs);
        assert.deepEqual(inbox.bodies, ['before']);

        await subscription.resume();
        const [, resumed] = await inbox.waitFor(2);
        assert.equal(resumed!.body.toString(), 'during');
        resumed!.ack();
        await sleep(quietMs);
        assert.deepEqual(inbox.bodies, ['before', 'during'], 'the message acked while paused is not redelivered');
      });
    });

    describe('topic routing', () => {
      test('routes by pattern (* one word, # any words), one copy per queue', async (bed) => {
        const broker = await bed.connect();
        const exchange = await bed.exchange(broker);
        const oneWord = await bed.queue(broker, 'one-word');
        const anyWords = await bed.queue(broker, 'any-words');
        await broker.bindQueue(oneWord, exchange, 'a.*.finished');
        await broker.bindQueue(anyWords, exchange, 'a.#');
        await broker.bindQueue(anyWords, exchange, 'a.x.*'); // overlaps a.#: still one copy
        const oneWordInbox = new Inbox(true);
        const anyWordsInbox = new Inbox(true);
        await broker.consume(oneWord, oneWordInbox.handler, { prefetch: 10 });
        await broker.consume(anyWords, anyWordsInbox.handler, { prefetch: 10 });

        for (const key of ['a.x.finished', 'a.x.y.finished', 'a', 'b.x.finished']) {
          await broker.publish(exchange, key, body(key), { messageId: key });
        }

        await oneWordInbox.waitFor(1);
        await anyWordsInbox.waitFor(3);
        await sleep(quietMs);
        assert.deepEqual(oneWordInbox.bodies, ['a.x.finished']);
        assert.deepEqual(anyWordsInbox.bodies, ['a.x.finished', 'a.x.y.finished', 'a']);
        assert.deepEqual(
          anyWordsInbox.deliveries.map((delivery) => delivery.routingKey),
          ['a.x.finished', 'a.x.y.finished', 'a'],
        );
      });

      test("the default exchange '' routes by queue name", async (bed) => {
        const broker = await bed.connect();
        const queue = await bed.queue(broker);
        const inbox = new Inbox(true);
        await broker.consume(queue, inbox.handler, { prefetch: 1 });
        await broker.publish('', queue, body('direct'));
        await broker.publish('', uniqueName('missing'), body('nowhere')); // not mandatory: dropped
        const [delivery] = await inbox.waitFor(1);
        assert.equal(delivery!.body.toString(), 'direct');
      });
    });

    describe('request and reply', () => {
      test('each request gets its own reply, with the request headers seen by the server', async (bed) => {
        const server = await bed.connect();
        const client = await bed.connect();
        const queue = await bed.queue(server);
        await server.serve(queue, async (request: IncomingRequest) => {
          await sleep(Number(request.body.toString()));
          return body(`${request.body.toString()}:${String(request.headers.tenant)}`);
        });

        const replies = await Promise.all(
          ['30', '1', '15'].map((delay) => client.request(queue, body(delay), { timeoutMs: 5000, headers: { tenant: `t${delay}` } })),
        );
        assert.deepEqual(
          replies.map((reply) => reply.toString()),
          ['30:t30', '1:t1', '15:t15'],
        );
      });

      test("a server handler's error comes back as remote_error", async (bed) => {
        const server = await bed.connect();
        const queue = await bed.queue(server);
        await server.serve(queue, () => {
          throw new Error('lease refused: job already finished');
        });
        const client = await bed.connect();
        await assert.rejects(client.request(queue, body('x'), { timeoutMs: 5000 }), (error: unknown) => {
          assert.ok(isBrokerError(error, 'remote_error'));
          assert.match(error.message, /lease refused/);
          return true;
        });
      });

      test('a request nobody answers rejects with timeout', async (bed) => {
        const client = await bed.connect();
        const queue = await bed.queue(client);
        const started = Date.now();
        await assertRejectsWith(client.request(queue, body('x'), { timeoutMs: 150 }), 'timeout');
        assert.ok(Date.now() - started >= 140, 'not before its timeout');
      });

      test('a request that expired while waiting in the queue is not served late', async (bed) => {
        const client = await bed.connect();
        const queue = await bed.queue(client);
        await assertRejectsWith(client.request(queue, body('stale'), { timeoutMs: 100 }), 'timeout');
        await sleep(100);

        const server = await bed.connect();
        const served: string[] = [];
        await server.serve(queue, (request) => {
          served.push(request.body.toString());
          return body('ok');
        });
        await sleep(quietMs);
        assert.deepEqual(served, []);

        const reply = await client.request(queue, body('fresh'), { timeoutMs: 5000 });
        assert.equal(reply.toString(), 'ok');
        assert.deepEqual(served, ['fresh']);
      });

      test('a reply later than the timeout is received within waitMs, and only then; a request still queued at its timeout expires all the same', async (bed) => {
        const server = await bed.connect();
        const client = await bed.connect();
        const queue = await bed.queue(server);
        await server.serve(queue, async (request) => {
          await sleep(300);
          return body(`late ${request.body.toString()}`);
        });
        // Taken by the server at once, answered after 300 ms: past the timeout, within the wait.
        const reply = await client.request(queue, body('a'), { timeoutMs: 100, waitMs: 2000 });
        assert.equal(reply.toString(), 'late a');
        await assertRejectsWith(client.request(queue, body('b'), { timeoutMs: 100 }), 'timeout');
        await assert.rejects(client.request(queue, body('c'), { timeoutMs: 100, waitMs: 50 }), RangeError);

        // The wait does not keep a request alive in the queue: nobody serves this one in time.
        const idle = await bed.queue(client);
        const started = Date.now();
        const unserved = client.request(idle, body('stale'), { timeoutMs: 100, waitMs: 600 });
        await sleep(200);
        const served: string[] = [];
        await server.serve(idle, (request) => {
          served.push(request.body.toString());
          return body('ok');
        });
        await assertRejectsWith(unserved, 'timeout');
        assert.ok(Date.now() - started >= 590, 'rejects at the end of the wait');
        assert.deepEqual(served, []);
      });

      test('a request to a queue that does not exist rejects with unroutable', async (bed) => {
        const client = await bed.connect();
        await assertRejectsWith(client.request(uniqueName('missing'), body('x'), { timeoutMs: 5000 }), 'unroutable');
      });

      test('a request through an exchange reaches the queue bound under its name; a missing exchange or no binding rejects with unroutable', async (bed) => {
        const server = await bed.connect();
        const client = await bed.connect();
        const queue = await bed.queue(server);
        const exchange = await bed.exchange(server);
        await server.serve(queue, (request) => body(`via ${request.body.toString()}`));
        await assertRejectsWith(client.request(queue, body('x'), { timeoutMs: 5000, exchange: uniqueName('missing') }), 'unroutable');
        await assertRejectsWith(client.request(queue, body('x'), { timeoutMs: 5000, exchange }), 'unroutable');
        await server.bindQueue(queue, exchange, queue);
        const reply = await client.request(queue, body('exchange'), { timeoutMs: 5000, exchange });
        assert.equal(reply.toString(), 'via exchange');
      });
    });

    describe('expiration', () => {
      test('a message left in the queue past its expiration is dropped', async (bed) => {
        const broker = await bed.connect();
        const queue = await bed.queue(broker);
        await broker.sendToQueue(queue, body('short'), { expirationMs: 80 });
        await broker.sendToQueue(queue, body('forever'));
        await broker.sendToQueue(queue, body('long'), { expirationMs: 60_000 });
        await sleep(200);

        const inbox = new Inbox(true);
        await broker.consume(queue, inbox.handler, { prefetch: 10 });
        await inbox.waitFor(2);
        await sleep(quietMs);
        assert.deepEqual(inbox.bodies, ['forever', 'long']);
      });
    });

    describe('close', () => {
      test('after close, pending requests and new calls reject with closed', async (bed) => {
        const broker = await bed.connect();
        const queue = await bed.queue(broker);
        const pending = assertRejectsWith(broker.request(queue, body('x'), { timeoutMs: 10_000 }), 'closed');
        await sleep(20);
        await broker.close();
        await pending;
        await assertRejectsWith(broker.sendToQueue(queue, body('x')), 'closed');
        await assertRejectsWith(broker.request(queue, body('x'), { timeoutMs: 1000 }), 'closed');
        await broker.close(); // idempotent
      });
    });
  });
}
