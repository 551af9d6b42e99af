import amqp, { type ChannelModel } from 'amqplib';
import { Backoff, type BackoffOptions } from './backoff.js';
import { redacted } from './amqp-urls.js';

export interface NodeRotationOptions {
  /** The cluster's nodes, tried in this order first. */
  urls: string[];
  /** Bounds the TCP connect plus the AMQP handshake of one attempt. */
  connectTimeoutMs: number;
  retry: BackoffOptions;
  /** Runs on every new connection before it is reported connected; a throw makes it try the next node. */
  setUp: (model: ChannelModel) => Promise<void>;
  /** A connection that was set up closed (not by `close`). */
  onLost: (error: Error) => void;
  /** A connection is set up: `restored` after a loss, not on the first one. */
  onConnected: (url: string, restored: boolean) => void;
}

/**
 * One AMQP connection to one of several RabbitMQ nodes, kept up. amqplib connects to one
 * URL; this tries the nodes in turn: at start each once, in order, failing fast when none
 * answers; after a loss, starting with the node after the one lost (the lost one is
 * likely down), going round the list with capped exponential backoff between rounds, so
 * a live node is reached within one connect timeout per dead node ahead of it.
 */
export class NodeRotation {
  private readonly backoff: Backoff;
  private model: ChannelModel | undefined;
  /** Index of the node to try next. */
  private next = 0;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private connectedOnce = false;

  constructor(private readonly options: NodeRotationOptions) {
    if (options.urls.length === 0) throw new TypeError('no RabbitMQ URL given');
    this.backoff = new Backoff(options.retry);
  }

  /** Connects to the first node that answers, or throws naming every node's failure. */
  async open(): Promise<void> {
    const failures: string[] = [];
    for (const url of this.options.urls) {
      try {
        await this.attempt();
        return;
      } catch (error) {
        failures.push(`${redacted(url)}: ${(error as Error).message}`);
      }
    }
    throw new Error(failures.join('; '));
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    const model = this.model;
    this.model = undefined;
    await model?.close().catch(() => undefined);
  }

  /** One try at the next node in the rotation; the rotation moves on whatever happens. */
  private async attempt(): Promise<void> {
    const url = this.options.urls[this.next]!;
    this.next = (this.next + 1) % this.options.urls.length;
    // amqplib's own options: Nagle off (small control frames; see RabbitMqBroker), one attempt's timeout.
    const model = await amqp.connect(url, { timeout: this.options.connectTimeoutMs, noDelay: true });
    model.on('error', () => undefined); // always followed by 'close', handled below
    try {
      await this.options.setUp(model);
    } catch (error) {
      await model.close().catch(() => undefined);
      throw error;
    }
    if (this.closed) {
      await model.close().catch(() => undefined);
      throw new Error('the broker was closed while connecting');
    }
    this.model = model;
    this.backoff.reset();
    model.once('close', (error?: Error) => this.lost(model, error ?? new Error('connection closed')));
    const restored = this.connectedOnce;
    this.connectedOnce = true;
    this.options.onConnected(url, restored);
  }

  private lost(model: ChannelModel, error: Error): void {
    if (this.model !== model || this.closed) return;
    this.model = undefined;
    this.options.onLost(error);
    this.reconnect(0);
  }

  /** Goes round the nodes: the next one at once, and a backoff delay each time the round is complete. */
  private reconnect(triedThisRound: number): void {
    if (this.closed) return;
    const roundDone = triedThisRound >= this.options.urls.length;
    const delayMs = roundDone ? this.backoff.next() : 0;
    this.timer = setTimeout(() => {
      this.attempt().catch(() => this.reconnect(roundDone ? 1 : triedThisRound + 1));
    }, delayMs);
  }
}
