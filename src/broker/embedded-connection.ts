import { randomUUID } from 'node:crypto';
import {
  BrokerError,
  isBrokerError,
  type Broker,
  type BrokerEvent,
  type ConsumeOptions,
  type DeliveryHandler,
  type PublishOptions,
  type RequestHandler,
  type RequestOptions,
  type ServeOptions,
  type Subscription,
} from './broker.js';
import type { EmbeddedBroker, OutgoingMessage } from './embedded.js';
import { EmbeddedSubscription, type SubscriptionHost } from './embedded-subscription.js';
import { BrokerEvents } from './events.js';
import { requirePrefetch, requireTtl, requireWait } from './options.js';
import { PendingRequests, serveRequests } from './rpc.js';

/** One client of the embedded broker; closing it is what a lost connection is to RabbitMQ. */
export class EmbeddedConnection implements Broker {
  private readonly events = new BrokerEvents();
  private readonly subscriptions = new Set<EmbeddedSubscription>();
  private readonly requests = new PendingRequests();
  private readonly replyAddress: string;
  private closed = false;
  /** What subscriptions see of this connection and its broker. */
  private readonly subscriptionHost: SubscriptionHost;

  constructor(
    private readonly core: EmbeddedBroker,
    private readonly onClosed: () => void,
  ) {
    this.replyAddress = core.openReplyAddress((reply) => this.requests.answer(reply.correlationId, reply));
    this.subscriptionHost = {
      events: this.events,
      consumerTimeoutMs: core.consumerTimeoutMs,
      attach: (queue, consumer) => core.attach(queue, consumer),
      detach: (queue, consumer) => core.detach(queue, consumer),
      wake: (queue) => core.wake(queue),
      forget: (subscription) => this.subscriptions.delete(subscription),
    };
  }

  async declareQueue(name: string): Promise<void> {
    this.ensureOpen();
    this.core.declareQueue(name);
    await this.core.durable();
  }

  async declareTopicExchange(name: string): Promise<void> {
    this.ensureOpen();
    this.core.declareTopicExchange(name);
    await this.core.durable();
  }

  async bindQueue(queue: string, exchange: string, pattern: string): Promise<void> {
    this.ensureOpen();
    this.core.bindQueue(queue, exchange, pattern);
    await this.core.durable();
  }

  async deleteQueue(name: string): Promise<void> {
    this.ensureOpen();
    this.core.deleteQueue(name);
    await this.core.durable();
  }

  async deleteExchange(name: string): Promise<void> {
    this.ensureOpen();
    this.core.deleteExchange(name);
    await this.core.durable();
  }

  async sendToQueue(queue: string, body: Buffer, options: PublishOptions = {}): Promise<void> {
    this.ensureOpen();
    this.core.sendToQueue(queue, outgoing(body, options));
    await this.core.durable();
  }

  async publish(exchange: string, routingKey: string, body: Buffer, options: PublishOptions = {}): Promise<void> {
    this.ensureOpen();
    this.core.publish(exchange, routingKey, outgoing(body, options));
    await this.core.durable();
  }

  async consume(queue: string, handler: DeliveryHandler, options: ConsumeOptions): Promise<Subscription> {
    this.ensureOpen();
    const prefetch = requirePrefetch(options.prefetch);
    if (!this.core.hasQueue(queue)) throw new BrokerError('not_found', `no queue named ${queue}`);
    const subscription = new EmbeddedSubscription(this.subscriptionHost, queue, handler, prefetch);
    this.subscriptions.add(subscription);
    this.core.attach(queue, subscription);
    return subscription;
  }

  async request(queue: string, body: Buffer, options: RequestOptions): Promise<Buffer> {
    this.ensureOpen();
    const timeoutMs = requireTtl('timeoutMs', options.timeoutMs);
    const correlationId = randomUUID();
    const reply = this.requests.wait(correlationId, queue, requireWait(timeoutMs, options.waitMs));
    const message = { body, correlationId, replyTo: this.replyAddress, headers: options.headers, expirationMs: timeoutMs };
    try {
      if (options.exchange === undefined) this.core.sendToQueue(queue, message);
      else this.routeThrough(options.exchange, queue, message);
    } catch (error) {
      this.requests.fail(correlationId, error as Error);
    }
    return reply;
  }

  /** A request published through an exchange must reach a queue, as a mandatory publish on RabbitMQ. */
  private routeThrough(exchange: string, routingKey: string, message: OutgoingMessage): void {
    let routed: number;
    try {
      routed = this.core.publish(exchange, routingKey, message);
    } catch (error) {
      if (isBrokerError(error, 'not_found')) throw new BrokerError('unroutable', `no exchange named ${exchange}`, { cause: error });
      throw error;
    }
    if (routed === 0) throw new BrokerError('unroutable', `the exchange ${exchange} routes ${routingKey} to no queue`);
  }

  serve(queue: string, handler: RequestHandler, options?: ServeOptions): Promise<Subscription> {
    return serveRequests(this, this.events, queue, handler, options);
  }

  onEvent(listener: (event: BrokerEvent) => void): () => void {
    return this.events.on(listener);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([...this.subscriptions].map((subscription) => subscription.cancel()));
    this.requests.failAll(new BrokerError('closed', 'the connection was closed'));
    this.core.closeReplyAddress(this.replyAddress);
    this.onClosed();
  }

  private ensureOpen(): void {
    if (this.closed) throw new BrokerError('closed', 'the connection is closed');
  }
}

function outgoing(body: Buffer, options: PublishOptions): OutgoingMessage {
  return {
    body,
    messageId: options.messageId,
    correlationId: options.correlationId,
    headers: options.headers,
    expirationMs: options.expirationMs === undefined ? undefined : requireTtl('expirationMs', options.expirationMs),
  };
}
