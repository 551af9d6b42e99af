/**
 * The Broker for a process that is not the one owning the EmbeddedBroker: it speaks to
 * an EmbeddedBrokerServer over its Unix socket, with the same semantics as a connection
 * taken in-process (`EmbeddedBroker.connect()`), which is what the server holds for it.
 *
 * Like the RabbitMQ broker, it recovers from losing the server (the orchestrator
 * restarted): everything in flight rejects `disconnected`, and so does anything tried
 * before the link is back; it reconnects with capped exponential backoff, declares again
 * what it declared, resumes the consumers that are not paused, then reports
 * `connection_restored`. Messages its consumers held were requeued by the server (or
 * lost with it: the ledger, not the broker, is the record).
 */
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
import { Backoff, type BackoffOptions } from './backoff.js';
import { encodeBody, requireSocketPath, type Operation, type WirePublishOptions } from './embedded-socket-protocol.js';
import { Link, type LinkReceiver } from './embedded-socket-link.js';
import { SocketSubscription, type SubscriptionHost } from './embedded-socket-subscription.js';
import { BrokerEvents } from './events.js';
import { requirePrefetch, requireTtl, requireWait } from './options.js';
import { serveRequests } from './rpc.js';

export interface SocketBrokerOptions {
  /** The server's socket, e.g. `<data-dir>/broker.sock`. */
  path: string;
  /**
   * Delays between reconnection attempts, and between attempts to restart a consumer the
   * server refused (default 50 ms, doubling up to 2 s).
   */
  retry?: BackoffOptions;
  /** How long one connection attempt waits for the server's greeting (default 5 s). */
  connectTimeoutMs?: number;
}

const defaults = { retry: { initialMs: 50, maxMs: 2000 }, connectTimeoutMs: 5000 };

/** How much longer than a request's own timeout the client waits for the server to say so. */
const requestGuardMs = 1000;

export class SocketBroker implements Broker {
  private readonly events = new BrokerEvents();
  private readonly topology = new DeclaredTopology();
  private readonly subscriptions = new Map<number, SocketSubscription>();
  private readonly retry: BackoffOptions;
  private readonly reconnectBackoff: Backoff;
  private readonly connectTimeoutMs: number;
  /** The link in use: set once a link is set up, cleared when it goes. */
  private live: Link | undefined;
  /** A link being set up after a reconnect, so close() can end it too. */
  private settingUp: Link | undefined;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private reconnecting = false;
  /** Whether the client was last reported connected (at connect, or by connection_restored): lost and restored come in pairs. */
  private reportedUp = true;
  private nextSubscriptionId = 1;
  private closed = false;
  private readonly receiver: LinkReceiver = {
    delivery: (link, frame) => {
      const subscription = this.subscriptions.get(frame.sub);
      if (subscription) subscription.receive(link, frame.tag, frame.message);
      else link.settle(frame.tag, { kind: 'nack', requeue: true }); // cancelled meanwhile
    },
    interrupted: (frame) => this.events.emit({ type: 'consumer_interrupted', queue: frame.queue, reason: frame.reason }),
    lost: (link, error) => this.lost(link, error),
  };
  private readonly subscriptionHost: SubscriptionHost = {
    events: this.events,
    liveLink: () => (this.closed ? undefined : this.live),
    forget: (subscription) => this.subscriptions.delete(subscription.id),
  };

  private constructor(private readonly options: SocketBrokerOptions) {
    this.retry = options.retry ?? defaults.retry;
    this.reconnectBackoff = new Backoff(this.retry);
    this.connectTimeoutMs = options.connectTimeoutMs ?? defaults.connectTimeoutMs;
  }

  /** Connects, failing fast (`disconnected`) if no server answers now; later losses are recovered from. */
  static async connect(options: SocketBrokerOptions): Promise<SocketBroker> {
    requireSocketPath(options.path);
    const broker = new SocketBroker(options);
    broker.live = await Link.open(options.path, broker.connectTimeoutMs, broker.receiver);
    return broker;
  }

  async declareQueue(name: string): Promise<void> {
    await this.call({ op: 'declareQueue', name });
    this.topology.addQueue(name);
  }

  async declareTopicExchange(name: string): Promise<void> {
    await this.call({ op: 'declareTopicExchange', name });
    this.topology.addExchange(name);
  }

  async bindQueue(queue: string, exchange: string, pattern: string): Promise<void> {
    await this.call({ op: 'bindQueue', queue, exchange, pattern });
    this.topology.addBinding(queue, exchange, pattern);
  }

  async deleteQueue(name: string): Promise<void> {
    this.topology.removeQueue(name);
    await this.call({ op: 'deleteQueue', name });
  }

  async deleteExchange(name: string): Promise<void> {
    this.topology.removeExchange(name);
    await this.call({ op: 'deleteExchange', name });
  }

  async sendToQueue(queue: string, body: Buffer, options: PublishOptions = {}): Promise<void> {
    await this.call({ op: 'sendToQueue', queue, body: encodeBody(body), options: wireOptions(options) });
  }

  async publish(exchange: string, routingKey: string, body: Buffer, options: PublishOptions = {}): Promise<void> {
    await this.call({ op: 'publish', exchange, routingKey, body: encodeBody(body), options: wireOptions(options) });
  }

  async consume(queue: string, handler: DeliveryHandler, options: ConsumeOptions): Promise<Subscription> {
    this.ensureOpen();
    const prefetch = requirePrefetch(options.prefetch);
    const id = this.nextSubscriptionId++;
    const subscription = new SocketSubscription(this.subscriptionHost, id, queue, handler, prefetch, new Backoff(this.retry));
    this.subscriptions.set(id, subscription);
    await subscription.start();
    return subscription;
  }

  async request(queue: string, body: Buffer, options: RequestOptions): Promise<Buffer> {
    this.ensureOpen();
    const timeoutMs = requireTtl('timeoutMs', options.timeoutMs);
    const waitMs = requireWait(timeoutMs, options.waitMs);
    const reply = await this.call(
      {
        op: 'request',
        queue,
        body: encodeBody(body),
        timeoutMs,
        ...(waitMs === timeoutMs ? {} : { waitMs }),
        headers: options.headers,
        ...(options.exchange === undefined ? {} : { exchange: options.exchange }),
      },
      waitMs + requestGuardMs,
    );
    return Buffer.from(reply ?? '', 'base64');
  }

  serve(queue: string, handler: RequestHandler, options?: ServeOptions): Promise<Subscription> {
    return serveRequests(this, this.events, queue, handler, options);
  }

  onEvent(listener: (event: BrokerEvent) => void): () => void {
    return this.events.on(listener);
  }

  /**
   * Closes the link; the server then closes the connection, which requeues what the
   * subscriptions held. Resolves once it has. Idempotent.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = undefined;
    for (const subscription of this.subscriptions.values()) subscription.abandon();
    this.subscriptions.clear();
    const links = [this.live, this.settingUp];
    this.live = undefined;
    await Promise.all(links.map(async (link) => link?.close()));
  }

  private ensureOpen(): void {
    if (this.closed) throw new BrokerError('closed', 'the broker was closed');
  }

  private call(call: Operation, guardMs?: number): Promise<string | undefined> {
    this.ensureOpen();
    if (!this.live) throw new BrokerError('disconnected', 'not connected to the embedded broker (reconnecting)');
    return this.live.call(call, guardMs);
  }

  private lost(link: Link, error: Error): void {
    if (link !== this.live) return; // a link being set up: reconnect() sees it fail
    this.live = undefined;
    if (this.reportedUp) this.events.emit({ type: 'connection_lost', error });
    this.reportedUp = false;
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.closed || this.reconnectTimer || this.reconnecting) return;
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      void this.reconnect();
    }, this.reconnectBackoff.next());
  }

  private async reconnect(): Promise<void> {
    this.reconnecting = true;
    try {
      const link = await Link.open(this.options.path, this.connectTimeoutMs, this.receiver);
      if (this.closed) {
        await link.close(); // close() came while it was opening
        return;
      }
      this.settingUp = link; // from here close() ends it
      try {
        await this.redeclare(link);
      } catch {
        link.destroy();
        return;
      }
      if (!link.alive || this.closed) return;
      // Live before the consumers resume, so their handlers can publish (an RPC server replies).
      this.live = link;
      await Promise.all([...this.subscriptions.values()].map((subscription) => subscription.reattach(link)));
      if (this.live !== link) return; // lost again meanwhile: lost() took it from here
      this.reconnectBackoff.reset();
      this.reportedUp = true;
      this.events.emit({ type: 'connection_restored' });
    } catch {
      // No server yet: try again later.
    } finally {
      this.settingUp = undefined;
      this.reconnecting = false;
      if (!this.live) this.scheduleReconnect();
    }
  }

  /** Declares everything again on a new link; throws if the link goes meanwhile. */
  private async redeclare(link: Link): Promise<void> {
    for (const declaration of this.topology.declarations()) {
      try {
        await link.call(declaration.call);
      } catch (error) {
        if (isBrokerError(error, 'disconnected') || isBrokerError(error, 'closed')) throw error;
        // One stale declaration (a binding to an exchange since deleted) must not hold up the rest.
        this.events.emit({ type: 'redeclare_refused', what: declaration.what, error: error as Error });
      }
    }
  }
}

function wireOptions(options: PublishOptions): WirePublishOptions {
  return {
    messageId: options.messageId,
    correlationId: options.correlationId,
    headers: options.headers,
    expirationMs: options.expirationMs === undefined ? undefined : requireTtl('expirationMs', options.expirationMs),
  };
}

/** What this client declared, to declare again on a new link: a restarted server has none of it. */
class DeclaredTopology {
  private readonly queues = new Set<string>();
  private readonly exchanges = new Set<string>();
  private readonly bindings = new Map<string, { queue: string; exchange: string; pattern: string }>();

  addQueue(name: string): void {
    this.queues.add(name);
  }

  addExchange(name: string): void {
    this.exchanges.add(name);
  }

  addBinding(queue: string, exchange: string, pattern: string): void {
    this.bindings.set(JSON.stringify([queue, exchange, pattern]), { queue, exchange, pattern });
  }

  removeQueue(name: string): void {
    this.queues.delete(name);
    for (const [key, binding] of this.bindings) if (binding.queue === name) this.bindings.delete(key);
  }

  removeExchange(name: string): void {
    this.exchanges.delete(name);
    for (const [key, binding] of this.bindings) if (binding.exchange === name) this.bindings.delete(key);
  }

  *declarations(): Generator<{ what: string; call: Operation }> {
    for (const name of this.exchanges) yield { what: `exchange ${name}`, call: { op: 'declareTopicExchange', name } };
    for (const name of this.queues) yield { what: `queue ${name}`, call: { op: 'declareQueue', name } };
    for (const { queue, exchange, pattern } of this.bindings.values()) {
      yield { what: `binding of ${queue} to ${exchange} (${pattern})`, call: { op: 'bindQueue', queue, exchange, pattern } };
    }
  }
}
