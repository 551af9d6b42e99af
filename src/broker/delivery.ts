import type { Delivery, DeliveryHandler } from './broker.js';

export type Settlement = { kind: 'ack' } | { kind: 'nack'; requeue: boolean };

/** What a broker knows about a message when it hands it to a consumer. */
export interface DeliveredMessage {
  body: Buffer;
  messageId: string | undefined;
  headers: Readonly<Record<string, unknown>>;
  routingKey: string;
  redelivered: boolean;
  replyTo: string | undefined;
  correlationId: string | undefined;
  userId?: string | undefined;
}

/**
 * A delivery that passes on only its first ack or nack. Handlers and the failure path can
 * both try to settle, and RabbitMQ closes the channel on a second ack of the same tag.
 */
export class OneShotDelivery implements Delivery {
  readonly body: Buffer;
  readonly messageId: string | undefined;
  readonly headers: Readonly<Record<string, unknown>>;
  readonly routingKey: string;
  readonly redelivered: boolean;
  readonly replyTo: string | undefined;
  readonly correlationId: string | undefined;
  readonly userId: string | undefined;
  private isSettled = false;

  constructor(
    message: DeliveredMessage,
    private readonly settle: (settlement: Settlement) => void,
  ) {
    this.body = message.body;
    this.messageId = message.messageId;
    this.headers = message.headers;
    this.routingKey = message.routingKey;
    this.redelivered = message.redelivered;
    this.replyTo = message.replyTo;
    this.correlationId = message.correlationId;
    this.userId = message.userId;
  }

  get settled(): boolean {
    return this.isSettled;
  }

  ack(): void {
    this.settleOnce({ kind: 'ack' });
  }

  nack(options?: { requeue?: boolean }): void {
    this.settleOnce({ kind: 'nack', requeue: options?.requeue ?? true });
  }

  private settleOnce(settlement: Settlement): void {
    if (this.isSettled) return;
    this.isSettled = true;
    this.settle(settlement);
  }
}

/**
 * Runs a consumer's handler on one delivery, on a later microtask so the broker's
 * dispatch finishes first. A handler that fails before settling gets its delivery
 * requeued: a bug must not drop a message.
 */
export function runHandler(handler: DeliveryHandler, delivery: OneShotDelivery, onFailure: (error: unknown) => void): void {
  Promise.resolve()
    .then(() => handler(delivery))
    .catch((error: unknown) => {
      if (!delivery.settled) delivery.nack({ requeue: true });
      onFailure(error);
    });
}
