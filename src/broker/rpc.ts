import { BrokerError, isBrokerError, type Broker, type RequestHandler, type ServeOptions, type Subscription } from './broker.js';
import type { BrokerEvents } from './events.js';

/** Set on a reply whose server handler threw; its value is the error message. */
const errorHeader = 'x-rpc-error';
const defaultServePrefetch = 32;

export interface Reply {
  body: Buffer;
  headers: Readonly<Record<string, unknown>>;
}

interface Waiter {
  resolve(body: Buffer): void;
  reject(error: Error): void;
  timer: NodeJS.Timeout;
}

/** The requests a client is waiting on, by correlation id, each with its own timeout. */
export class PendingRequests {
  private readonly waiters = new Map<string, Waiter>();

  wait(correlationId: string, queue: string, timeoutMs: number): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.delete(correlationId);
        reject(new BrokerError('timeout', `no reply from ${queue} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiters.set(correlationId, { resolve, reject, timer });
    });
  }

  /** Settles the request a reply answers; a reply nobody waits for (it came too late) is ignored. */
  answer(correlationId: string | undefined, reply: Reply): void {
    const waiter = correlationId === undefined ? undefined : this.take(correlationId);
    if (!waiter) return;
    const error = reply.headers[errorHeader];
    if (error === undefined) waiter.resolve(reply.body);
    else waiter.reject(new BrokerError('remote_error', typeof error === 'string' ? error : JSON.stringify(error)));
  }

  fail(correlationId: string, error: Error): void {
    this.take(correlationId)?.reject(error);
  }

  failAll(error: Error): void {
    for (const correlationId of [...this.waiters.keys()]) this.fail(correlationId, error);
  }

  private take(correlationId: string): Waiter | undefined {
    const waiter = this.waiters.get(correlationId);
    if (!waiter) return undefined;
    this.waiters.delete(correlationId);
    clearTimeout(waiter.timer);
    return waiter;
  }
}

/**
 * The RPC server both brokers share, built on their own consume and sendToQueue: each
 * request is answered (a throwing handler's error travels back in the reply), then acked.
 */
export function serveRequests(
  broker: Pick<Broker, 'consume' | 'sendToQueue'>,
  events: BrokerEvents,
  queue: string,
  handler: RequestHandler,
  options: ServeOptions | undefined,
): Promise<Subscription> {
  return broker.consume(
    queue,
    async (delivery) => {
      const { replyTo, correlationId } = delivery;
      if (replyTo === undefined) {
        // Nobody to answer: running it would have an effect no one learns about.
        delivery.ack();
        return;
      }
      let body: Buffer;
      let headers: Record<string, string> | undefined;
      try {
        body = await handler({ body: delivery.body, headers: delivery.headers });
      } catch (error) {
        events.emit({ type: 'handler_failed', queue, error });
        body = Buffer.alloc(0);
        headers = { [errorHeader]: error instanceof Error ? error.message : String(error) };
      }
      try {
        await broker.sendToQueue(replyTo, body, { correlationId, headers });
      } catch (error) {
        // An unroutable reply means the requester is gone: the request is done with. (Only the embedded
        // broker says so; RabbitMQ drops a reply to a gone direct reply-to address, see ConfirmPublisher.sendToQueue.)
        // Otherwise the reply may not have gone out, so the request goes back for another try.
        if (!isBrokerError(error, 'unroutable')) {
          delivery.nack({ requeue: true });
          return;
        }
      }
      delivery.ack();
    },
    { prefetch: options?.prefetch ?? defaultServePrefetch },
  );
}
