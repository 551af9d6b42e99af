import type { Clock } from '../core/clock.js';

/** A message as one queue of the embedded broker holds it. */
export interface StoredMessage {
  /** Arrival order across the broker: a requeued message goes back to its old place. */
  readonly seq: number;
  readonly body: Buffer;
  readonly routingKey: string;
  readonly messageId: string | undefined;
  readonly correlationId: string | undefined;
  readonly replyTo: string | undefined;
  readonly headers: Readonly<Record<string, unknown>>;
  /** Clock time from which the message is dropped instead of delivered. */
  readonly expiresAt: number | undefined;
  redelivered: boolean;
  /** Kept in the broker's store until it leaves the queue for good. */
  durable: boolean;
}

export interface QueueConsumer {
  /** How many more messages the consumer takes right now. */
  capacity(): number;
  take(message: StoredMessage, from: EmbeddedQueue): void;
  /** The queue was deleted under the consumer, with the messages it held. */
  queueDeleted(): void;
}

/**
 * One queue: ready messages in order, and the consumers they go to, round robin among
 * those with room under their prefetch. Dispatch runs on `setImmediate`, never inside the
 * call that published or settled, so a consumer that requeues forever cannot starve I/O.
 */
export class EmbeddedQueue {
  private readonly ready: StoredMessage[] = [];
  private readonly consumers: QueueConsumer[] = [];
  private nextConsumer = 0;
  private scheduledDispatch: NodeJS.Immediate | undefined;
  private isDeleted = false;

  constructor(
    readonly name: string,
    private readonly clock: Clock,
    /** Told when a message leaves the queue for good: acked, dropped, or expired. */
    private readonly onGone: (message: StoredMessage) => void = () => undefined,
  ) {}

  enqueue(message: StoredMessage): void {
    this.ready.push(message);
    this.wake();
  }

  requeue(message: StoredMessage): void {
    if (this.isDeleted) return;
    message.redelivered = true;
    const later = this.ready.findIndex((waiting) => waiting.seq > message.seq);
    this.ready.splice(later === -1 ? this.ready.length : later, 0, message);
    this.wake();
  }

  /** The consumer acked the message, or nacked it without requeue. */
  discard(message: StoredMessage): void {
    if (!this.isDeleted) this.onGone(message);
  }

  addConsumer(consumer: QueueConsumer): void {
    if (!this.consumers.includes(consumer)) this.consumers.push(consumer);
    this.wake();
  }

  removeConsumer(consumer: QueueConsumer): void {
    const index = this.consumers.indexOf(consumer);
    if (index !== -1) this.consumers.splice(index, 1);
  }

  /** Asks for a dispatch soon: a consumer may have room, or a message may be waiting. */
  wake(): void {
    if (this.scheduledDispatch || this.isDeleted) return;
    this.scheduledDispatch = setImmediate(() => this.dispatch());
  }

  /** Drops the messages and tells the consumers. */
  delete(): void {
    this.stop();
    this.isDeleted = true;
    this.ready.length = 0;
    for (const consumer of this.consumers.splice(0)) consumer.queueDeleted();
  }

  /** Cancels a scheduled dispatch, so a closed broker leaves no pending callbacks. */
  stop(): void {
    if (this.scheduledDispatch) clearImmediate(this.scheduledDispatch);
    this.scheduledDispatch = undefined;
  }

  private dispatch(): void {
    this.scheduledDispatch = undefined;
    while (this.ready.length > 0) {
      const consumer = this.consumerWithRoom();
      if (!consumer) return;
      const message = this.ready.shift()!;
      // Like RabbitMQ, an expired message is dropped when it would be delivered.
      if (message.expiresAt !== undefined && message.expiresAt <= this.clock.now()) {
        this.onGone(message);
        continue;
      }
      consumer.take(message, this);
    }
  }

  private consumerWithRoom(): QueueConsumer | undefined {
    for (let i = 0; i < this.consumers.length; i++) {
      const index = (this.nextConsumer + i) % this.consumers.length;
      const consumer = this.consumers[index]!;
      if (consumer.capacity() > 0) {
        this.nextConsumer = index + 1;
        return consumer;
      }
    }
    return undefined;
  }
}
