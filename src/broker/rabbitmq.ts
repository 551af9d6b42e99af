import type { Channel, ChannelModel, Options } from 'amqplib';
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
import { parseAmqpUrls, redactedList } from './amqp-urls.js';
import { Backoff, type BackoffOptions } from './backoff.js';
import { BrokerEvents } from './events.js';
import { requirePrefetch, requireTtl, requireWait } from './options.js';
import { brokerErrorFrom } from './rabbitmq-errors.js';
import { ConfirmPublisher } from './rabbitmq-publisher.js';
import { RabbitSubscription, type SubscriptionHost } from './rabbitmq-subscription.js';
import { NodeRotation } from './rabbitmq-connection.js';
import { DeclaredTopology, declareQueue, type QueueType } from './rabbitmq-topology.js';
import { serveRequests } from './rpc.js';

export interface RabbitMqOptions {
  /**
   * `amqp://user:password@host:port/vhost`, or a cluster's nodes separated by commas
   * (`amqp://u:p@a,b:5673,c/vhost`, or whole URLs): see parseAmqpUrls.
   */
  url: string;
  /**
   * The type planrun's queues are declared with (default classic). `quorum`: replicated
   * on a RabbitMQ cluster, so a confirmed message survives the loss of a minority of nodes.
   */
  queueType?: QueueType;
  /**
   * AMQP heartbeat in whole seconds (default 5): both ends drop a connection that has
   * been silent for about two of them. RabbitMQ's 60 s default leaves a dead worker's
   * messages stuck for minutes.
   */
  heartbeatSeconds?: number;
  /**
   * Bounds the TCP connect plus the AMQP handshake (default 5 s), so a reconnect into a
   * black hole gives up and tries again.
   */
  connectTimeoutMs?: number;
  /**
   * Delays between reconnection attempts, and between attempts to restart a consumer the
   * broker closed (default 100 ms, doubling up to 10 s).
   */
  retry?: BackoffOptions;
}

const defaults = { heartbeatSeconds: 5, connectTimeoutMs: 5000, retry: { initialMs: 100, maxMs: 10_000 } };

/**
 * The Broker on RabbitMQ, through amqplib. One connection; a confirm channel for every
 * publish and for RPC replies (direct reply-to); one channel per consumer.
 *
 * When the connection drops, everything in flight on it rejects `disconnected`, and it
 * reconnects with capped exponential backoff, to the next node of the list when given
 * several (NodeRotation). Each new connection is set up
 * before it is used: everything declared so far is declared again, and every consumer
 * that is not paused consumes again. Operations attempted while disconnected reject
 * `disconnected` at once rather than wait: the caller decides whether to retry.
 */
export class RabbitMqBroker implements Broker {
  private readonly events = new BrokerEvents();
  private readonly topology: DeclaredTopology;
  private readonly subscriptions = new Set<RabbitSubscription>();
  private readonly retry: BackoffOptions;
  private readonly queueType: QueueType;
  private connection: NodeRotation | undefined;
  /** The connection in use: set once a connection is set up, cleared when it closes. */
  private live: ChannelModel | undefined;
  private publisher: ConfirmPublisher | undefined;
  private openingPublisher: Promise<ConfirmPublisher> | undefined;
  /** Exchanges requests go through that were found to exist, on the connection named. */
  private checkedExchanges: { connection: ChannelModel | undefined; names: Set<string> } = { connection: undefined, names: new Set() };
  private closed = false;
  /** What subscriptions see of this broker. */
  private readonly subscriptionHost: SubscriptionHost = {
    events: this.events,
    liveConnection: () => (this.closed ? undefined : this.live),
    forget: (subscription) => this.subscriptions.delete(subscription),
  };

  private constructor(private readonly options: RabbitMqOptions) {
    this.retry = options.retry ?? defaults.retry;
    this.queueType = options.queueType ?? 'classic';
    this.topology = new DeclaredTopology(this.queueType);
  }

  /** Connects, failing fast if RabbitMQ cannot be reached now; later losses are recovered from. */
  static async connect(options: RabbitMqOptions): Promise<RabbitMqBroker> {
    const broker = new RabbitMqBroker(options);
    await broker.start();
    return broker;
  }

  private async start(): Promise<void> {
    const heartbeatSeconds = this.options.heartbeatSeconds ?? defaults.heartbeatSeconds;
    if (!Number.isInteger(heartbeatSeconds) || heartbeatSeconds < 1) {
      throw new RangeError(`heartbeatSeconds must be a positive integer (got ${heartbeatSeconds})`);
    }
    const urls = parseAmqpUrls(this.options.url).map((url) => withHeartbeat(url, heartbeatSeconds));
    const connection = new NodeRotation({
      urls,
      connectTimeoutMs: this.options.connectTimeoutMs ?? defaults.connectTimeoutMs,
      retry: this.retry,
      setUp: (model) => this.setUp(model),
      onLost: (error) => this.events.emit({ type: 'connection_lost', error }),
      onConnected: (_url, restored) => {
        if (restored) this.events.emit({ type: 'connection_restored' });
      },
    });
    this.connection = connection;
    try {
      await connection.open();
    } catch (error) {
      // With several nodes, why each failed; with one, the cause says it, as before.
      const each = urls.length > 1 ? ` (${(error as Error).message})` : '';
      throw new BrokerError('disconnected', `cannot connect to RabbitMQ at ${redactedList(this.options.url)}${each}`, { cause: error });
    }
  }

  /** Runs on every new connection, before it is reported connected; a throw makes it try the next node. */
  private async setUp(model: ChannelModel): Promise<void> {
    model.on('error', () => undefined); // followed by 'close'
    model.on('close', () => {
      if (this.live === model) this.live = undefined;
    });
    await this.topology.redeclare(model, (what, error) => this.events.emit({ type: 'redeclare_refused', what, error }));
    this.live = model;
    // The publisher is opened on first use, so only consumers need resuming here.
    await Promise.all([...this.subscriptions].map((subscription) => subscription.reattach()));
    if (this.live !== model) throw new Error('the connection was lost while it was being set up');
  }

  async declareQueue(name: string): Promise<void> {
    await this.onTemporaryChannel(`declaring queue ${name}`, (channel) => declareQueue(channel, name, this.queueType));
    this.topology.addQueue(name);
  }

  async declareTopicExchange(name: string): Promise<void> {
    await this.onTemporaryChannel(`declaring exchange ${name}`, (channel) => channel.assertExchange(name, 'topic', { durable: true }));
    this.topology.addExchange(name);
  }

  async bindQueue(queue: string, exchange: string, pattern: string): Promise<void> {
    await this.onTemporaryChannel(`binding ${queue} to ${exchange}`, (channel) => channel.bindQueue(queue, exchange, pattern));
    this.topology.addBinding({ queue, exchange, pattern });
  }

  async deleteQueue(name: string): Promise<void> {
    this.topology.removeQueue(name);
    await this.onTemporaryChannel(`deleting queue ${name}`, (channel) => channel.deleteQueue(name));
  }

  async deleteExchange(name: string): Promise<void> {
    this.topology.removeExchange(name);
    await this.onTemporaryChannel(`deleting exchange ${name}`, (channel) => channel.deleteExchange(name));
  }

  async sendToQueue(queue: string, body: Buffer, options: PublishOptions = {}): Promise<void> {
    const publisher = await this.openPublisher();
    await this.retiredOnNack(publisher, publisher.sendToQueue(queue, body, persistent(options)));
  }

  async publish(exchange: string, routingKey: string, body: Buffer, options: PublishOptions = {}): Promise<void> {
    const publisher = await this.openPublisher();
    await this.retiredOnNack(publisher, publisher.publish(exchange, routingKey, body, persistent(options)));
  }

  async consume(queue: string, handler: DeliveryHandler, options: ConsumeOptions): Promise<Subscription> {
    const prefetch = requirePrefetch(options.prefetch);
    this.ensureOpen();
    const subscription = new RabbitSubscription(this.subscriptionHost, queue, handler, prefetch, new Backoff(this.retry));
    this.subscriptions.add(subscription);
    await subscription.start();
    return subscription;
  }

  async request(queue: string, body: Buffer, options: RequestOptions): Promise<Buffer> {
    const timeoutMs = requireTtl('timeoutMs', options.timeoutMs);
    const waitMs = requireWait(timeoutMs, options.waitMs);
    if (options.exchange !== undefined) await this.requireExchange(options.exchange);
    const publisher = await this.openPublisher();
    return this.retiredOnNack(publisher, publisher.request(queue, body, { timeoutMs, waitMs, headers: options.headers, exchange: options.exchange }));
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
    await this.publisher?.close();
    await this.connection?.close();
  }

  private ensureOpen(): void {
    if (this.closed) throw new BrokerError('closed', 'the broker was closed');
  }

  private requireLiveConnection(): ChannelModel {
    this.ensureOpen();
    if (!this.live) throw new BrokerError('disconnected', 'not connected to RabbitMQ (reconnecting)');
    return this.live;
  }

  /**
   * Rejects `unroutable` unless the exchange exists, checked once per connection: a
   * publish to a missing exchange would close the publishing channel under every other
   * publish in flight. A passive check needs no permission.
   */
  private async requireExchange(exchange: string): Promise<void> {
    const connection = this.requireLiveConnection();
    if (this.checkedExchanges.connection !== connection) this.checkedExchanges = { connection, names: new Set() };
    const { names } = this.checkedExchanges;
    if (names.has(exchange)) return;
    try {
      await this.onTemporaryChannel(`checking exchange ${exchange}`, (channel) => channel.checkExchange(exchange));
    } catch (error) {
      if (isBrokerError(error, 'not_found')) throw new BrokerError('unroutable', `no exchange named ${exchange}`, { cause: error });
      throw error;
    }
    names.add(exchange);
  }

  /**
   * `operation`, closing its publisher when the broker nacks the message, so the next
   * publish opens a fresh channel. On RabbitMQ 3.10 a channel that published to a quorum
   * queue while its leader's node was down can go on being nacked for good after a new
   * leader was elected (seen in src/broker/rabbitmq-cluster.test.ts: every control request
   * of a worker nacked for ten minutes); a new channel publishes normally. Other publishes
   * in flight on it reject `disconnected`, which callers already retry.
   */
  private async retiredOnNack<T>(publisher: ConfirmPublisher, operation: Promise<T>): Promise<T> {
    try {
      return await operation;
    } catch (error) {
      if (isBrokerError(error, 'publish_nacked') && this.publisher === publisher) {
        this.publisher = undefined;
        publisher.retire();
      }
      throw error;
    }
  }

  /** The connection's publisher, opened on first use and again after its channel is lost. */
  private async openPublisher(): Promise<ConfirmPublisher> {
    this.ensureOpen();
    if (this.publisher?.isOpen) return this.publisher;
    if (!this.openingPublisher) {
      const connection = this.requireLiveConnection();
      this.openingPublisher = ConfirmPublisher.open(connection)
        .then((publisher) => (this.publisher = publisher))
        .catch((error: unknown) => {
          throw brokerErrorFrom(error, 'opening the publishing channel');
        })
        .finally(() => (this.openingPublisher = undefined));
    }
    return this.openingPublisher;
  }

  /**
   * Declarations run on a channel of their own: one the broker refuses closes that
   * channel only, and the refusal comes back as this call's error.
   */
  private async onTemporaryChannel(what: string, operation: (channel: Channel) => Promise<unknown>): Promise<void> {
    const connection = this.requireLiveConnection();
    let channel: Channel | undefined;
    try {
      channel = await connection.createChannel();
      channel.on('error', () => undefined); // a refusal rejects the operation itself
      await operation(channel);
    } catch (error) {
      throw brokerErrorFrom(error, what);
    } finally {
      channel?.close().catch(() => undefined);
    }
  }
}

function persistent(options: PublishOptions): Options.Publish {
  return {
    persistent: true,
    messageId: options.messageId,
    correlationId: options.correlationId,
    headers: options.headers,
    expiration: options.expirationMs === undefined ? undefined : String(requireTtl('expirationMs', options.expirationMs)),
  };
}

function withHeartbeat(url: string, heartbeatSeconds: number): string {
  const parsed = new URL(url);
  parsed.searchParams.set('heartbeat', String(heartbeatSeconds));
  return parsed.toString();
}
