import { BrokerError, type DeliveryHandler, type Subscription } from './broker.js';
import { OneShotDelivery, runHandler, type Settlement } from './delivery.js';
import type { EmbeddedQueue, QueueConsumer, StoredMessage } from './embedded-queue.js';
import type { BrokerEvents } from './events.js';

/** What a subscription needs from the connection that opened it. */
export interface SubscriptionHost {
  readonly events: BrokerEvents;
  readonly consumerTimeoutMs: number | undefined;
  /** Registers the consumer on the queue (or, if the queue was deleted, for when it is declared again). */
  attach(queue: string, consumer: QueueConsumer): void;
  detach(queue: string, consumer: QueueConsumer): void;
  wake(queue: string): void;
  forget(subscription: EmbeddedSubscription): void;
}

interface HeldMessage {
  message: StoredMessage;
  from: EmbeddedQueue;
  consumerTimer: NodeJS.Timeout | undefined;
}

/**
 * A consumer of the embedded broker, behaving like a RabbitMQ consumer on its own channel:
 * it holds its deliveries until settled, requeues them if it is cancelled, and if one
 * stays unacknowledged past the consumer timeout it is closed (its deliveries requeued,
 * late acks ignored) and then resumes, as the RabbitMQ broker does after the channel close.
 */
export class EmbeddedSubscription implements Subscription, QueueConsumer {
  private state: 'consuming' | 'paused' | 'cancelled' = 'consuming';
  /** Tags are never reused, so settling a delivery taken back from this consumer finds nothing. */
  private nextTag = 1;
  private readonly held = new Map<number, HeldMessage>();

  constructor(
    private readonly host: SubscriptionHost,
    readonly queue: string,
    private readonly handler: DeliveryHandler,
    private readonly prefetch: number,
  ) {}

  capacity(): number {
    return this.state === 'consuming' ? this.prefetch - this.held.size : 0;
  }

  take(message: StoredMessage, from: EmbeddedQueue): void {
    const tag = this.nextTag++;
    const timeoutMs = this.host.consumerTimeoutMs;
    const consumerTimer =
      timeoutMs === undefined
        ? undefined
        : setTimeout(() => this.interrupt(`a delivery stayed unacknowledged past the consumer timeout (${timeoutMs} ms)`), timeoutMs);
    this.held.set(tag, { message, from, consumerTimer });
    // A fresh copy of the body per delivery, as from a network broker: a handler that
    // mutates it must not change what a redelivery carries.
    const delivery = new OneShotDelivery({ ...message, body: Buffer.from(message.body) }, (settlement) => this.settle(tag, settlement));
    runHandler(this.handler, delivery, (error) => this.host.events.emit({ type: 'handler_failed', queue: this.queue, error }));
  }

  queueDeleted(): void {
    for (const held of this.held.values()) clearTimeout(held.consumerTimer);
    this.held.clear();
    this.host.events.emit({ type: 'consumer_interrupted', queue: this.queue, reason: 'the queue was deleted' });
    if (this.state === 'consuming') this.host.attach(this.queue, this);
  }

  async pause(): Promise<void> {
    if (this.state !== 'consuming') return;
    this.state = 'paused';
    this.host.detach(this.queue, this);
  }

  async resume(): Promise<void> {
    if (this.state === 'cancelled') throw new BrokerError('closed', `the subscription to ${this.queue} was cancelled`);
    if (this.state === 'consuming') return;
    this.state = 'consuming';
    this.host.attach(this.queue, this);
  }

  async cancel(): Promise<void> {
    if (this.state === 'cancelled') return;
    this.state = 'cancelled';
    this.host.detach(this.queue, this);
    this.requeueHeld();
    this.host.forget(this);
  }

  private settle(tag: number, settlement: Settlement): void {
    const held = this.held.get(tag);
    if (!held) return;
    this.held.delete(tag);
    clearTimeout(held.consumerTimer);
    if (settlement.kind === 'nack' && settlement.requeue) held.from.requeue(held.message);
    else held.from.discard(held.message);
    this.host.wake(this.queue);
  }

  private interrupt(reason: string): void {
    this.host.detach(this.queue, this);
    this.requeueHeld();
    this.host.events.emit({ type: 'consumer_interrupted', queue: this.queue, reason });
    if (this.state === 'consuming') this.host.attach(this.queue, this);
  }

  private requeueHeld(): void {
    for (const held of this.held.values()) {
      clearTimeout(held.consumerTimer);
      held.from.requeue(held.message);
    }
    this.held.clear();
  }
}
