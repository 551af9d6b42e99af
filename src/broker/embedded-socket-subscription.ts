/**
 * A consumer of a SocketBroker. The server holds the real consumer (its prefetch, its
 * unacknowledged deliveries) as long as the link that opened it lives; this side keeps
 * what the caller wants (consuming, paused, cancelled) and brings the server in line
 * with it: on each call, and on each new link after a reconnect.
 */
import { BrokerError, isBrokerError, type DeliveryHandler, type Subscription } from './broker.js';
import type { Backoff } from './backoff.js';
import { OneShotDelivery, runHandler } from './delivery.js';
import { messageFromWire, type WireMessage } from './embedded-socket-protocol.js';
import type { Link } from './embedded-socket-link.js';
import type { BrokerEvents } from './events.js';

/** What a subscription needs from the broker that opened it. */
export interface SubscriptionHost {
  readonly events: BrokerEvents;
  /** The link in use, if connected right now. */
  liveLink(): Link | undefined;
  forget(subscription: SocketSubscription): void;
}

type Wanted = 'consuming' | 'paused' | 'cancelled';

export class SocketSubscription implements Subscription {
  private wanted: Wanted = 'consuming';
  /** The server's consumer for this subscription, and the link it lives on. */
  private remote: { link: Link; state: 'consuming' | 'paused' } | undefined;
  private steps: Promise<void> = Promise.resolve();
  private retryTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly host: SubscriptionHost,
    /** This subscription's id on the wire, the same on every link. */
    readonly id: number,
    readonly queue: string,
    private readonly handler: DeliveryHandler,
    private readonly prefetch: number,
    private readonly backoff: Backoff,
  ) {}

  /** Starts consuming, or fails (leaving nothing behind) if that is not possible right now. */
  async start(): Promise<void> {
    try {
      const link = this.host.liveLink();
      if (!link) throw new BrokerError('disconnected', 'not connected to the embedded broker (reconnecting)');
      await this.bringInLine(link);
    } catch (error) {
      await this.cancel();
      throw error;
    }
  }

  /** Consumes again on a new link (the server forgot this consumer with the old one). */
  async reattach(link: Link): Promise<void> {
    await this.bringInLine(link).catch((error: unknown) => this.failedOn(error));
  }

  /** A delivery the server sent for this subscription on `link`. */
  receive(link: Link, tag: number, message: WireMessage): void {
    const delivery = new OneShotDelivery(messageFromWire(message), (settlement) => link.settle(tag, settlement));
    if (this.wanted === 'cancelled') {
      // Sent before the server saw the cancel, which requeued it: nothing to run.
      delivery.nack({ requeue: true });
      return;
    }
    runHandler(this.handler, delivery, (error) => this.host.events.emit({ type: 'handler_failed', queue: this.queue, error }));
  }

  async pause(): Promise<void> {
    if (this.wanted !== 'consuming') return;
    this.wanted = 'paused';
    await this.bringInLine(this.host.liveLink()).catch((error: unknown) => this.failedOn(error));
  }

  async resume(): Promise<void> {
    if (this.wanted === 'cancelled') throw new BrokerError('closed', `the subscription to ${this.queue} was cancelled`);
    if (this.wanted === 'consuming') return;
    this.wanted = 'consuming';
    await this.bringInLine(this.host.liveLink()).catch((error: unknown) => this.failedOn(error));
  }

  async cancel(): Promise<void> {
    if (this.wanted === 'cancelled') return;
    this.wanted = 'cancelled';
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    this.host.forget(this);
    await this.bringInLine(this.host.liveLink()).catch(() => undefined);
  }

  /** Forgets the server side without a word to it: its link is closing, and the server cancels with it. */
  abandon(): void {
    this.wanted = 'cancelled';
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    this.remote = undefined;
  }

  /** Queues one reconciliation step against `link`; steps never overlap. */
  private bringInLine(link: Link | undefined): Promise<void> {
    const step = this.steps.then(() => this.reconcile(link));
    this.steps = step.catch(() => undefined);
    return step;
  }

  private async reconcile(link: Link | undefined): Promise<void> {
    if (this.remote && !this.remote.link.alive) this.remote = undefined; // the server dropped it with its socket
    if (this.wanted === 'cancelled') {
      const remote = this.remote;
      this.remote = undefined;
      await remote?.link.call({ op: 'cancel', sub: this.id }).catch(() => undefined);
      return;
    }
    if (!link?.alive) return; // reattach() runs once a link is up again
    if (this.remote && this.remote.link !== link) this.remote = undefined;
    if (this.wanted === 'consuming') {
      if (!this.remote) {
        await link.call({ op: 'consume', sub: this.id, queue: this.queue, prefetch: this.prefetch });
        this.remote = { link, state: 'consuming' };
      } else if (this.remote.state === 'paused') {
        await link.call({ op: 'resume', sub: this.id });
        this.remote.state = 'consuming';
      }
      this.backoff.reset();
    } else if (this.remote?.state === 'consuming') {
      await link.call({ op: 'pause', sub: this.id });
      this.remote.state = 'paused';
    }
  }

  /**
   * A step failed. A lost link is dealt with by the reconnect; a refusal (say, the queue
   * is missing from a restarted broker) is reported, and tried again later.
   */
  private failedOn(error: unknown): void {
    if (this.wanted === 'cancelled' || isBrokerError(error, 'disconnected') || isBrokerError(error, 'closed')) return;
    this.host.events.emit({
      type: 'consumer_interrupted',
      queue: this.queue,
      reason: error instanceof Error ? error.message : String(error),
    });
    this.retryLater();
  }

  private retryLater(): void {
    if (this.retryTimer || this.wanted === 'cancelled') return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      this.bringInLine(this.host.liveLink()).catch((error: unknown) => this.failedOn(error));
    }, this.backoff.next());
  }
}
