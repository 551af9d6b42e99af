import { systemClock, type Clock } from '../core/clock.js';
import { BrokerError, type Broker, type HeaderValue } from './broker.js';
import { EmbeddedConnection } from './embedded-connection.js';
import { EmbeddedQueue, type QueueConsumer, type StoredMessage } from './embedded-queue.js';
import type { EmbeddedBrokerStore } from './embedded-store.js';
import { requireTtl } from './options.js';
import { topicMatches } from './topic.js';

export interface EmbeddedBrokerOptions {
  /**
   * Like RabbitMQ's consumer timeout: a delivery left unacknowledged this long closes its
   * consumer, whose deliveries are requeued; the consumer then resumes. Off by default.
   */
  consumerTimeoutMs?: number;
  /** Decides when per-message expirations have passed. */
  clock?: Clock;
  /**
   * Where queues, exchanges, bindings and queued messages are kept, so that they survive
   * a restart (even a SIGKILL) as RabbitMQ's durable ones do. The broker starts from what
   * it holds and closes it. Without one, everything lives in memory only.
   */
  store?: EmbeddedBrokerStore;
}

/** A message on its way into the broker, before a queue stamps it. */
export interface OutgoingMessage {
  body: Buffer;
  messageId?: string | undefined;
  correlationId?: string | undefined;
  replyTo?: string | undefined;
  headers?: Record<string, HeaderValue> | Readonly<Record<string, unknown>> | undefined;
  expirationMs?: number | undefined;
}

interface Binding {
  queue: string;
  pattern: string;
}

/** Names that look like RabbitMQ's direct reply-to, so nothing can declare a queue over them. */
const replyAddressPrefix = 'amq.rabbitmq.reply-to.';

/**
 * The in-process broker: queues, topic exchanges and reply addresses, shared by every
 * connection opened with `connect()`. With a store, what a queue holds survives a
 * restart and a publish is confirmed once stored (`durable()`); without one, state lives
 * in memory only. Everything the connections do goes through the methods below, so a
 * cross-process transport can drive them the same way.
 */
export class EmbeddedBroker {
  readonly clock: Clock;
  readonly consumerTimeoutMs: number | undefined;
  private readonly queues = new Map<string, EmbeddedQueue>();
  private readonly exchanges = new Map<string, Binding[]>();
  /** Consumers whose queue was deleted under them, waiting for it to be declared again. */
  private readonly orphans = new Map<string, Set<QueueConsumer>>();
  private readonly replyAddresses = new Map<string, (reply: StoredMessage) => void>();
  private readonly connections = new Set<EmbeddedConnection>();
  private readonly store: EmbeddedBrokerStore | undefined;
  private nextSeq = 1;
  /** The first seq this run stamps (after what was restored): every message routed takes one. */
  private readonly firstSeq: number;
  private nextReplyAddress = 1;
  private closed = false;

  constructor(options: EmbeddedBrokerOptions = {}) {
    this.clock = options.clock ?? systemClock;
    this.consumerTimeoutMs = options.consumerTimeoutMs === undefined ? undefined : requireTtl('consumerTimeoutMs', options.consumerTimeoutMs);
    this.store = options.store;
    if (this.store) this.restore(this.store);
    this.firstSeq = this.nextSeq;
  }

  /** Messages routed since the broker started (published, sent to a queue, or replies): for benchmarks and metrics. */
  get routedMessages(): number {
    return this.nextSeq - this.firstSeq;
  }

  /** Resolves once every change made so far is stored (at once without a store). */
  durable(): Promise<void> {
    return this.store?.durable() ?? Promise.resolve();
  }

  /** Opens a connection: a Broker whose subscriptions and pending requests end with it. */
  connect(): Broker {
    if (this.closed) throw new BrokerError('closed', 'the embedded broker is closed');
    const connection = new EmbeddedConnection(this, () => this.connections.delete(connection));
    this.connections.add(connection);
    return connection;
  }

  /** Closes every connection and cancels every pending dispatch: no timer outlives this. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([...this.connections].map((connection) => connection.close()));
    for (const queue of this.queues.values()) queue.stop();
    this.store?.close();
  }

  hasQueue(name: string): boolean {
    return this.queues.has(name);
  }

  declareQueue(name: string): void {
    if (name.startsWith(replyAddressPrefix)) {
      throw new BrokerError('refused', `queue names starting with ${replyAddressPrefix} are reserved`);
    }
    if (this.queues.has(name)) return;
    this.store?.declareQueue(name);
    this.createQueue(name);
  }

  declareTopicExchange(name: string): void {
    if (this.exchanges.has(name)) return;
    this.store?.declareExchange(name);
    this.exchanges.set(name, []);
  }

  bindQueue(queue: string, exchange: string, pattern: string): void {
    const bindings = this.exchanges.get(exchange);
    if (!bindings) throw new BrokerError('not_found', `no exchange named ${exchange}`);
    if (!this.queues.has(queue)) throw new BrokerError('not_found', `no queue named ${queue}`);
    if (bindings.some((binding) => binding.queue === queue && binding.pattern === pattern)) return;
    this.store?.bind(exchange, queue, pattern);
    bindings.push({ queue, pattern });
  }

  deleteQueue(name: string): void {
    const queue = this.queues.get(name);
    if (!queue) return;
    this.store?.deleteQueue(name);
    // Removed from the map first: consumers told of the deletion re-attach as orphans.
    this.queues.delete(name);
    queue.delete();
    for (const [exchange, bindings] of this.exchanges) {
      this.exchanges.set(
        exchange,
        bindings.filter((binding) => binding.queue !== name),
      );
    }
  }

  deleteExchange(name: string): void {
    if (!this.exchanges.delete(name)) return;
    this.store?.deleteExchange(name);
  }

  /** Direct publish; throws `unroutable` if there is no such queue (or reply address). */
  sendToQueue(queue: string, message: OutgoingMessage): void {
    const replyTo = this.replyAddresses.get(queue);
    if (replyTo) return replyTo(this.stamp(queue, message));
    const target = this.queues.get(queue);
    if (!target) throw new BrokerError('unroutable', `no queue named ${queue}`);
    this.enqueue(target, this.stamp(queue, message));
  }

  /**
   * Publish through an exchange: every bound queue whose pattern matches gets its own copy,
   * once however many of its bindings match. The default exchange `''` routes by queue name.
   * Returns how many queues took the message.
   */
  publish(exchange: string, routingKey: string, message: OutgoingMessage): number {
    if (exchange === '') {
      const target = this.queues.get(routingKey);
      if (target) this.enqueue(target, this.stamp(routingKey, message));
      return target ? 1 : 0;
    }
    const bindings = this.exchanges.get(exchange);
    if (!bindings) throw new BrokerError('not_found', `no exchange named ${exchange}`);
    const targets = new Set(bindings.filter((binding) => topicMatches(binding.pattern, routingKey)).map((binding) => binding.queue));
    let routed = 0;
    for (const name of targets) {
      const target = this.queues.get(name);
      if (!target) continue;
      this.enqueue(target, this.stamp(routingKey, message));
      routed += 1;
    }
    return routed;
  }

  attach(queue: string, consumer: QueueConsumer): void {
    const target = this.queues.get(queue);
    if (target) {
      target.addConsumer(consumer);
      return;
    }
    const waiting = this.orphans.get(queue) ?? new Set();
    waiting.add(consumer);
    this.orphans.set(queue, waiting);
  }

  detach(queue: string, consumer: QueueConsumer): void {
    this.queues.get(queue)?.removeConsumer(consumer);
    this.orphans.get(queue)?.delete(consumer);
  }

  wake(queue: string): void {
    this.queues.get(queue)?.wake();
  }

  /** A private address replies can be sent to, like RabbitMQ's direct reply-to. */
  openReplyAddress(receive: (reply: StoredMessage) => void): string {
    const address = `${replyAddressPrefix}${this.nextReplyAddress++}`;
    this.replyAddresses.set(address, receive);
    return address;
  }

  closeReplyAddress(address: string): void {
    this.replyAddresses.delete(address);
  }

  private createQueue(name: string): EmbeddedQueue {
    const queue = new EmbeddedQueue(name, this.clock, (message) => {
      if (message.durable) this.store?.removeMessage(name, message.seq);
    });
    this.queues.set(name, queue);
    for (const consumer of this.orphans.get(name) ?? []) queue.addConsumer(consumer);
    this.orphans.delete(name);
    return queue;
  }

  /** Stores the message (unless it is an RPC request, which nobody could answer after a restart) and queues it. */
  private enqueue(queue: EmbeddedQueue, message: StoredMessage): void {
    if (this.store && message.replyTo === undefined) {
      message.durable = true;
      this.store.addMessage(queue.name, message);
    }
    queue.enqueue(message);
  }

  /**
   * Starts from what the store holds. Every restored message is marked redelivered: the
   * broker cannot know whether it was delivered before the restart, and a consumer must
   * treat it as possibly seen (RabbitMQ does the same for messages it cannot vouch for).
   */
  private restore(store: EmbeddedBrokerStore): void {
    const state = store.load();
    for (const name of state.queues) this.createQueue(name);
    for (const name of state.exchanges) this.exchanges.set(name, []);
    for (const binding of state.bindings) this.exchanges.get(binding.exchange)?.push({ queue: binding.queue, pattern: binding.pattern });
    for (const message of state.messages) {
      this.queues.get(message.queue)?.enqueue({
        seq: message.seq,
        body: message.body,
        routingKey: message.routingKey,
        messageId: message.messageId,
        correlationId: message.correlationId,
        replyTo: undefined,
        headers: Object.freeze(message.headers),
        expiresAt: message.expiresAt,
        redelivered: true,
        durable: true,
      });
      this.nextSeq = Math.max(this.nextSeq, message.seq + 1);
    }
  }

  private stamp(routingKey: string, message: OutgoingMessage): StoredMessage {
    return {
      seq: this.nextSeq++,
      body: Buffer.from(message.body),
      routingKey,
      messageId: message.messageId,
      correlationId: message.correlationId,
      replyTo: message.replyTo,
      headers: Object.freeze({ ...message.headers }),
      expiresAt: message.expirationMs === undefined ? undefined : this.clock.now() + message.expirationMs,
      redelivered: false,
      durable: false,
    };
  }
}
