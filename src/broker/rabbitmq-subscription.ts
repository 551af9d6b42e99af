import type { Channel, ChannelModel, ConsumeMessage } from 'amqplib';
import { BrokerError, type DeliveryHandler, type Subscription } from './broker.js';
import type { Backoff } from './backoff.js';
import { OneShotDelivery, runHandler, type Settlement } from './delivery.js';
import type { BrokerEvents } from './events.js';
import { brokerErrorFrom } from './rabbitmq-errors.js';

/** What a subscription needs from the broker that opened it. */
export interface SubscriptionHost {
  readonly events: BrokerEvents;
  /** The live connection, if there is one right now. */
  liveConnection(): ChannelModel | undefined;
  forget(subscription: RabbitSubscription): void;
}

type Wanted = 'consuming' | 'paused' | 'cancelled';

/**
 * One consumer on its own channel, so its prefetch is its own and a channel the broker
 * closes (consumer timeout, deleted queue) takes no other consumer with it.
 *
 * The subscription keeps what the caller wants (consuming, paused, cancelled) and brings
 * the channel in line with it, one step at a time: on each call, when the broker
 * cancels the consumer or closes the channel (retrying with capped backoff), and when
 * the connection is restored. Pausing cancels the consumer but keeps the channel, so
 * deliveries held across the pause can still be acked.
 */
export class RabbitSubscription implements Subscription {
  private wanted: Wanted = 'consuming';
  private started = false;
  private channel: Channel | undefined;
  private consumerTag: string | undefined;
  private steps: Promise<void> = Promise.resolve();
  private retryTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly host: SubscriptionHost,
    readonly queue: string,
    private readonly handler: DeliveryHandler,
    private readonly prefetch: number,
    private readonly backoff: Backoff,
  ) {}

  /** Starts consuming, or fails (leaving nothing behind) if that is not possible right now. */
  async start(): Promise<void> {
    try {
      await this.bringInLine();
      if (this.consumerTag === undefined) throw new BrokerError('disconnected', 'not connected to RabbitMQ');
      this.started = true;
    } catch (error) {
      await this.cancel();
      throw brokerErrorFrom(error, `consuming from ${this.queue}`);
    }
  }

  /** Called once a lost connection is back. */
  async reattach(): Promise<void> {
    await this.bringInLine().catch(() => this.retryLater());
  }

  async pause(): Promise<void> {
    if (this.wanted !== 'consuming') return;
    this.wanted = 'paused';
    // If cancelling fails, the channel is going away, and the consumer with it.
    await this.bringInLine().catch(() => this.retryLater());
  }

  async resume(): Promise<void> {
    if (this.wanted === 'cancelled') throw new BrokerError('closed', `the subscription to ${this.queue} was cancelled`);
    if (this.wanted === 'consuming') return;
    this.wanted = 'consuming';
    await this.bringInLine().catch(() => this.retryLater());
  }

  async cancel(): Promise<void> {
    if (this.wanted === 'cancelled') return;
    this.wanted = 'cancelled';
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    this.host.forget(this);
    await this.bringInLine().catch(() => undefined);
  }

  /** Queues one reconciliation step; steps never overlap. */
  private bringInLine(): Promise<void> {
    const step = this.steps.then(() => this.reconcile());
    this.steps = step.catch(() => undefined);
    return step;
  }

  private async reconcile(): Promise<void> {
    if (this.wanted === 'cancelled') {
      // Closing the channel hands its unacknowledged messages back to the queue.
      const channel = this.channel;
      this.forgetChannel();
      await channel?.close().catch(() => undefined);
      return;
    }
    const connection = this.host.liveConnection();
    if (!connection) return; // reattach() runs when the connection is back
    const channel = this.channel ?? (await this.openChannel(connection));
    if (this.wanted === 'consuming' && this.consumerTag === undefined) {
      const { consumerTag } = await channel.consume(this.queue, (message) => this.receive(channel, message));
      this.consumerTag = consumerTag;
      this.backoff.reset();
    } else if (this.wanted === 'paused' && this.consumerTag !== undefined) {
      const consumerTag = this.consumerTag;
      this.consumerTag = undefined;
      await channel.cancel(consumerTag);
    }
  }

  private async openChannel(connection: ChannelModel): Promise<Channel> {
    const channel = await connection.createChannel();
    let closedBecause: string | undefined;
    // The broker closing the channel (consumer timeout, missing queue) arrives as 'error', then 'close'.
    channel.on('error', (error: Error) => (closedBecause = error.message));
    channel.on('close', () => this.channelClosed(channel, closedBecause));
    this.channel = channel;
    await channel.prefetch(this.prefetch);
    return channel;
  }

  private channelClosed(channel: Channel, closedBecause: string | undefined): void {
    if (this.channel !== channel) return;
    this.forgetChannel();
    if (this.wanted === 'cancelled') return;
    // Without a reason the connection went with it; reattach() brings it back then.
    if (closedBecause !== undefined && this.started) {
      this.host.events.emit({ type: 'consumer_interrupted', queue: this.queue, reason: closedBecause });
    }
    this.retryLater();
  }

  private receive(channel: Channel, message: ConsumeMessage | null): void {
    if (message === null) {
      // The broker cancelled the consumer (its queue was deleted, or its node went away).
      if (this.channel === channel) {
        this.consumerTag = undefined;
        this.host.events.emit({ type: 'consumer_interrupted', queue: this.queue, reason: 'the broker cancelled the consumer' });
        this.retryLater();
      }
      return;
    }
    const { properties, fields } = message;
    const delivery = new OneShotDelivery(
      {
        body: message.content,
        messageId: properties.messageId as string | undefined,
        headers: properties.headers ?? {},
        routingKey: fields.routingKey,
        redelivered: fields.redelivered,
        replyTo: properties.replyTo as string | undefined,
        correlationId: properties.correlationId as string | undefined,
        userId: properties.userId as string | undefined,
      },
      (settlement) => settleOn(channel, message, settlement),
    );
    runHandler(this.handler, delivery, (error) => this.host.events.emit({ type: 'handler_failed', queue: this.queue, error }));
  }

  private retryLater(): void {
    if (this.retryTimer || this.wanted === 'cancelled') return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      this.bringInLine().catch(() => this.retryLater());
    }, this.backoff.next());
  }

  private forgetChannel(): void {
    this.channel = undefined;
    this.consumerTag = undefined;
  }
}

function settleOn(channel: Channel, message: ConsumeMessage, settlement: Settlement): void {
  try {
    if (settlement.kind === 'ack') channel.ack(message);
    else channel.nack(message, false, settlement.requeue);
  } catch {
    // The channel is gone, and the broker requeued the message when it went: nothing to settle.
  }
}
