import { randomUUID } from 'node:crypto';
import type { ChannelModel, ConfirmChannel, ConsumeMessage, Message, Options } from 'amqplib';
import { BrokerError, type HeaderValue } from './broker.js';
import { brokerErrorFrom } from './rabbitmq-errors.js';
import { PendingRequests } from './rpc.js';

/** RabbitMQ's direct reply-to: replies come straight back on the channel that published the request. */
const directReplyTo = 'amq.rabbitmq.reply-to';

/** Where direct publishes (to a queue by name) go. */
const defaultExchange = '';

/** amqplib's wording for a confirm callback's error when the broker nacked the message. */
const nackedMessage = 'message nacked';

/** A mandatory publish awaiting its confirm; a `basic.return` for it arrives first, if it is unroutable. */
interface MandatoryPublish {
  routingKey: string;
  messageId: string | undefined;
  correlationId: string | undefined;
  returned: boolean;
}

/**
 * The one confirm channel of a connection: every publish goes through it and resolves on
 * the broker's confirm, and it consumes the direct reply-to pseudo-queue so RPC replies
 * come back to it. When the channel goes, everything in flight on it rejects (with
 * `disconnected`, `closed`, or what the broker closed it for) and the broker opens a new one.
 */
export class ConfirmPublisher {
  private readonly requests = new PendingRequests();
  private readonly awaitingConfirm = new Set<MandatoryPublish>();
  private deliberatelyClosed = false;
  private brokerCloseError: Error | undefined;
  private channelClosed = false;

  private constructor(private readonly channel: ConfirmChannel) {
    channel.on('error', (error: Error) => {
      // The broker closed the channel (e.g. a publish to a missing exchange); 'close' follows.
      this.brokerCloseError = error;
    });
    channel.on('close', () => {
      this.channelClosed = true;
      this.requests.failAll(this.lossReason(defaultExchange));
    });
    channel.on('return', (message: Message) => this.markReturned(message));
  }

  static async open(connection: ChannelModel): Promise<ConfirmPublisher> {
    const channel = await connection.createConfirmChannel();
    const publisher = new ConfirmPublisher(channel);
    try {
      await channel.consume(directReplyTo, (message) => publisher.receiveReply(message), { noAck: true });
    } catch (error) {
      await publisher.close();
      throw error;
    }
    return publisher;
  }

  get isOpen(): boolean {
    return !this.channelClosed && !this.deliberatelyClosed;
  }

  /**
   * Publishes straight to a queue; resolves on the confirm, rejects `unroutable` if there is no such queue.
   * A reply to a direct reply-to address is not mandatory: RabbitMQ returns every mandatory publish to
   * one as unroutable, delivered or not (with its whole body), so the flag could tell nothing; a reply
   * whose requester is gone is dropped by the broker, as an unroutable reply is by serveRequests.
   */
  sendToQueue(queue: string, body: Buffer, properties: Options.Publish): Promise<void> {
    return this.send(defaultExchange, queue, body, properties, !queue.startsWith(`${directReplyTo}.`));
  }

  /** Publishes to an exchange; resolves on the confirm, whether or not a binding matched. */
  publish(exchange: string, routingKey: string, body: Buffer, properties: Options.Publish): Promise<void> {
    return this.send(exchange, routingKey, body, properties, false);
  }

  /**
   * Publishes and resolves on the broker's confirm. `mandatory` publishes that no queue
   * takes reject with `unroutable` instead of vanishing.
   */
  private send(exchange: string, routingKey: string, body: Buffer, properties: Options.Publish, mandatory: boolean): Promise<void> {
    if (!this.isOpen) return Promise.reject(this.lossReason(exchange));
    return new Promise((resolve, reject) => {
      const tracked: MandatoryPublish | undefined = mandatory
        ? { routingKey, messageId: properties.messageId, correlationId: properties.correlationId, returned: false }
        : undefined;
      if (tracked) this.awaitingConfirm.add(tracked);
      const confirmed = (error: unknown): void => {
        if (tracked) this.awaitingConfirm.delete(tracked);
        if (error) reject(this.publishFailure(error, exchange));
        else if (tracked?.returned) reject(new BrokerError('unroutable', `no queue named ${routingKey}`));
        else resolve();
      };
      try {
        this.channel.publish(exchange, routingKey, body, { ...properties, mandatory }, confirmed);
      } catch {
        // amqplib throws synchronously once the channel is closing.
        if (tracked) this.awaitingConfirm.delete(tracked);
        reject(this.lossReason(exchange));
      }
    });
  }

  /**
   * Publishes a request that expires with its timeout, and waits for the reply: straight
   * to the queue, or through `exchange` with the queue's name as routing key.
   */
  request(
    queue: string,
    body: Buffer,
    request: { timeoutMs: number; waitMs: number; headers?: Record<string, HeaderValue>; exchange?: string },
  ): Promise<Buffer> {
    const correlationId = randomUUID();
    const reply = this.requests.wait(correlationId, queue, request.waitMs);
    const properties: Options.Publish = { correlationId, replyTo: directReplyTo, expiration: String(request.timeoutMs), headers: request.headers };
    // Not persistent: a request outliving a broker restart would be past its timeout anyway.
    this.send(request.exchange ?? defaultExchange, queue, body, properties, true).catch((error: Error) => this.requests.fail(correlationId, error));
    return reply;
  }

  /**
   * Closes the channel to open a fresh one (see RabbitMqBroker's retiredOnNack): what is in
   * flight on it rejects `disconnected`, which is safe to retry, not `closed`.
   */
  retire(): void {
    if (this.deliberatelyClosed || this.channelClosed) return;
    this.brokerCloseError = undefined;
    this.channelClosed = true;
    this.channel.close().catch(() => undefined);
  }

  async close(): Promise<void> {
    if (this.deliberatelyClosed) return;
    this.deliberatelyClosed = true;
    this.requests.failAll(this.lossReason(defaultExchange));
    await this.channel.close().catch(() => undefined);
  }

  private receiveReply(message: ConsumeMessage | null): void {
    if (message === null) {
      // The broker cancelled the reply consumer: no reply can reach this channel any more.
      this.channel.close().catch(() => undefined);
      return;
    }
    this.requests.answer(message.properties.correlationId as string | undefined, {
      body: message.content,
      headers: message.properties.headers ?? {},
    });
  }

  private markReturned(message: Message): void {
    const { routingKey } = message.fields;
    const { messageId, correlationId } = message.properties as { messageId?: string; correlationId?: string };
    const returned = [...this.awaitingConfirm].find(
      (publish) => !publish.returned && publish.routingKey === routingKey && publish.messageId === messageId && publish.correlationId === correlationId,
    );
    if (returned) returned.returned = true;
  }

  private publishFailure(error: unknown, exchange: string): BrokerError {
    if (error instanceof Error && error.message === nackedMessage) {
      return new BrokerError('publish_nacked', 'RabbitMQ refused the message (basic.nack)', { cause: error });
    }
    return this.lossReason(exchange);
  }

  /**
   * Why this channel can no longer carry a publish to `exchange`: closed by us, closed by
   * the broker, or lost with the connection.
   */
  private lossReason(exchange: string): BrokerError {
    if (this.deliberatelyClosed) return new BrokerError('closed', 'the broker was closed');
    if (!this.brokerCloseError) {
      return new BrokerError('disconnected', 'the connection to RabbitMQ was lost; the publish may not have arrived');
    }
    const reason = brokerErrorFrom(this.brokerCloseError, 'RabbitMQ closed the publishing channel');
    // A publish to a missing exchange closes the channel under everything in flight. Only
    // publishes to the exchange the broker names get `not_found`; for the others it is a
    // lost channel, which is safe to retry.
    if (reason.code === 'not_found' && !reason.message.includes(`'${exchange}'`)) {
      return new BrokerError('disconnected', `the publishing channel was closed under this publish: ${reason.message}`, {
        cause: this.brokerCloseError,
      });
    }
    return reason;
  }
}
