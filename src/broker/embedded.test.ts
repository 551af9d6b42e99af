import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../core/clock.js';
import type { BrokerEvent } from './broker.js';
import { brokerConformance } from '../../test/broker/conformance.js';
import { EmbeddedBroker } from './embedded.js';
import { eventually, Inbox, quietMs, sleep } from '../../test/broker/testkit.js';

brokerConformance('embedded', async () => {
  const core = new EmbeddedBroker();
  return { connect: async () => core.connect(), close: () => core.close() };
});

function timersAndImmediates(): number {
  return process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout' || kind === 'Immediate').length;
}

describe('EmbeddedBroker', () => {
  it('closes a consumer that holds a delivery past the consumer timeout, requeues it, and resumes the consumer', async () => {
    const core = new EmbeddedBroker({ consumerTimeoutMs: 100 });
    try {
      const broker = core.connect();
      await broker.declareQueue('work');
      const events: BrokerEvent[] = [];
      broker.onEvent((event) => events.push(event));
      const naive = new Inbox(false); // never acks, like a worker that acks only at the end of a long job
      await broker.consume('work', naive.handler, { prefetch: 1 });
      await broker.sendToQueue('work', Buffer.from('long job'), { messageId: 'job-1' });

      await naive.waitFor(3, 2000);
      assert.deepEqual(
        naive.deliveries.map((delivery) => [delivery.messageId, delivery.redelivered]),
        [
          ['job-1', false],
          ['job-1', true],
          ['job-1', true],
        ],
      );
      const interruptions = events.filter((event) => event.type === 'consumer_interrupted');
      assert.ok(interruptions.length >= 2);
      assert.match(JSON.stringify(interruptions[0]), /consumer timeout/);

      // A late ack from a closed consumer changes nothing; acking the current delivery ends the loop.
      naive.deliveries[0]!.ack();
      naive.deliveries.at(-1)!.ack();
      const settledAt = naive.deliveries.length;
      await sleep(250);
      assert.equal(naive.deliveries.length, settledAt);
    } finally {
      await core.close();
    }
  });

  it('a consumer paused when it times out stays paused, and its delivery goes to another consumer', async () => {
    const core = new EmbeddedBroker({ consumerTimeoutMs: 80 });
    try {
      const broker = core.connect();
      await broker.declareQueue('work');
      const paused = new Inbox(false);
      const subscription = await broker.consume('work', paused.handler, { prefetch: 1 });
      await broker.sendToQueue('work', Buffer.from('x'));
      await paused.waitFor(1);
      await subscription.pause();

      const other = new Inbox(true);
      await core.connect().consume('work', other.handler, { prefetch: 1 });
      const [delivery] = await other.waitFor(1);
      assert.equal(delivery!.redelivered, true);
      await sleep(quietMs);
      assert.equal(paused.deliveries.length, 1);
    } finally {
      await core.close();
    }
  });

  it('judges expiration by its clock', async () => {
    const clock = new ManualClock();
    const core = new EmbeddedBroker({ clock });
    try {
      const broker = core.connect();
      await broker.declareQueue('q');
      await broker.sendToQueue('q', Buffer.from('soon'), { expirationMs: 1000 });
      await broker.sendToQueue('q', Buffer.from('later'), { expirationMs: 2000 });
      clock.advance(1000);

      const inbox = new Inbox(true);
      await broker.consume('q', inbox.handler, { prefetch: 10 });
      await inbox.waitFor(1);
      await sleep(quietMs);
      assert.deepEqual(inbox.bodies, ['later']);
    } finally {
      await core.close();
    }
  });

  it('a consumer whose queue is deleted resumes when the queue is declared again', async () => {
    const core = new EmbeddedBroker();
    try {
      const broker = core.connect();
      await broker.declareQueue('q');
      const events: BrokerEvent[] = [];
      broker.onEvent((event) => events.push(event));
      const inbox = new Inbox(true);
      await broker.consume('q', inbox.handler, { prefetch: 1 });

      await broker.deleteQueue('q');
      assert.deepEqual(events, [{ type: 'consumer_interrupted', queue: 'q', reason: 'the queue was deleted' }]);
      await broker.declareQueue('q');
      await broker.sendToQueue('q', Buffer.from('after'));
      await inbox.waitFor(1);
    } finally {
      await core.close();
    }
  });

  it('leaves no timers behind once closed', async () => {
    const before = timersAndImmediates();
    const core = new EmbeddedBroker({ consumerTimeoutMs: 60_000 });
    const broker = core.connect();
    await broker.declareQueue('q');
    const inbox = new Inbox(false);
    await broker.consume('q', inbox.handler, { prefetch: 5 });
    await broker.sendToQueue('q', Buffer.from('held'));
    await inbox.waitFor(1);
    const pending = broker.request('q', Buffer.from('unanswered'), { timeoutMs: 60_000 });
    await eventually('a held delivery and a pending request', () => inbox.deliveries.length === 2);
    assert.ok(timersAndImmediates() > before);

    await core.close();
    await assert.rejects(pending);
    assert.equal(timersAndImmediates(), before);
  });
});
