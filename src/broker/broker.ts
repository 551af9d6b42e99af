/**
 * The one messaging interface the rest of planrun uses: work messages, results, and the
 * request/reply control plane between workers and the orchestrator. Two implementations
 * honour it with the same at-least-once semantics: RabbitMQ (`rabbitmq.ts`) and an
 * in-process broker (`embedded.ts`); `conformance.ts` holds the suite both must pass.
 *
 * Semantics every implementation keeps:
 * - Queues and exchanges are durable, messages persistent; a publish resolves only once
 *   the broker has taken responsibility for the message (publisher confirm).
 * - A delivery stays the consumer's until it is acked or nacked. If the consumer goes
 *   away first (cancelled, connection lost, consumer timeout), the message is delivered
 *   again, with `redelivered` set, and with the same message id and headers.
 * - Nothing is ever reported as published unless it was; operations cut short by a lost
 *   connection reject with code `disconnected` and the caller retries.
 */
export interface Broker {
  /** Declares a durable queue (idempotent). */
  declareQueue(name: string): Promise<void>;
  /** Declares a durable topic exchange (idempotent). */
  declareTopicExchange(name: string): Promise<void>;
  /** Routes messages published to `exchange` whose routing key matches `pattern` (`*` one word, `#` any words) to `queue`. */
  bindQueue(queue: string, exchange: string, pattern: string): Promise<void>;
  /** Deletes a queue and its messages (no-op if it does not exist). */
  deleteQueue(name: string): Promise<void>;
  /** Deletes an exchange and its bindings (no-op if it does not exist). */
  deleteExchange(name: string): Promise<void>;

  /**
   * Publishes a persistent message straight to a queue. Resolves on the broker's confirm;
   * rejects `unroutable` if no queue has that name, `publish_nacked` if the broker refused it.
   */
  sendToQueue(queue: string, body: Buffer, options?: PublishOptions): Promise<void>;
  /**
   * Publishes a persistent message to an exchange. Resolves on the broker's confirm, also
   * when no binding matched (nobody listening to results is not an error); rejects
   * `not_found` if the exchange does not exist.
   */
  publish(exchange: string, routingKey: string, body: Buffer, options?: PublishOptions): Promise<void>;

  /**
   * Delivers the queue's messages to `handler`, at most `prefetch` unacknowledged at a
   * time, handlers running concurrently. A handler that throws (or rejects) before
   * settling its delivery gets it requeued, and a `handler_failed` event is emitted.
   */
  consume(queue: string, handler: DeliveryHandler, options: ConsumeOptions): Promise<Subscription>;

  /**
   * Sends a request to the server consuming `queue` and resolves with its reply. The
   * request expires in the queue after `timeoutMs`, so a server that was down does not
   * answer it late. Rejects `timeout`, `disconnected`, `unroutable`, or `remote_error`
   * (the server's handler threw; its message is carried over).
   */
  request(queue: string, body: Buffer, options: RequestOptions): Promise<Buffer>;
  /** Answers requests on `queue`: each request is replied to, then acked. */
  serve(queue: string, handler: RequestHandler, options?: ServeOptions): Promise<Subscription>;

  /** Reports connection and consumer incidents; returns a function that unsubscribes. */
  onEvent(listener: (event: BrokerEvent) => void): () => void;

  /**
   * Closes every subscription (their unacknowledged messages go back to their queues),
   * rejects pending requests with `closed`, and releases the connection. Idempotent.
   */
  close(): Promise<void>;
}

export type HeaderValue = string | number | boolean;

export interface PublishOptions {
  /** Kept through redeliveries: consumers deduplicate on it. */
  messageId?: string;
  /** Which request a reply answers (set by RPC servers; see `Delivery.correlationId`). */
  correlationId?: string;
  headers?: Record<string, HeaderValue>;
  /** Per-message TTL: a message still queued this long after publishing is dropped. */
  expirationMs?: number;
}

export interface Delivery {
  readonly body: Buffer;
  readonly messageId: string | undefined;
  readonly headers: Readonly<Record<string, unknown>>;
  readonly routingKey: string;
  /** True when this message was delivered before and not acknowledged. */
  readonly redelivered: boolean;
  /** Set on RPC requests: where and under which id the reply goes. */
  readonly replyTo: string | undefined;
  readonly correlationId: string | undefined;
  /**
   * The `user_id` property: on RabbitMQ, the broker user that published the message (it
   * refuses a publish whose user_id is not the connection's user). The embedded broker
   * has no users and never sets it.
   */
  readonly userId: string | undefined;
  /** Settles the delivery; only the first ack or nack counts, later ones are ignored. */
  ack(): void;
  /** Gives the message back (`requeue`, the default) or drops it. */
  nack(options?: { requeue?: boolean }): void;
}

export type DeliveryHandler = (delivery: Delivery) => void | Promise<void>;

export interface ConsumeOptions {
  /** Most unacknowledged deliveries this consumer holds at once (a positive integer). */
  prefetch: number;
}

/**
 * A live consumer. It survives connection loss and consumer timeouts by itself: it is
 * resumed after them, unless paused or cancelled.
 */
export interface Subscription {
  /**
   * Stops deliveries (the consumer is cancelled at the broker): once this resolves no new
   * delivery reaches the handler. Deliveries already held stay held, and ackable.
   */
  pause(): Promise<void>;
  /** Starts deliveries again after `pause`. */
  resume(): Promise<void>;
  /** Ends the subscription; its unacknowledged messages are redelivered to others. */
  cancel(): Promise<void>;
}

export interface RequestOptions {
  /** The request expires in the queue after this long, and the call rejects `timeout` then unless `waitMs` says longer. */
  timeoutMs: number;
  /**
   * How long to wait for the reply, if longer than `timeoutMs` (never shorter): a server
   * that took the request before it expired may answer after `timeoutMs`, and a caller
   * that can still use such a late answer (a lease granted to it) says how long it listens.
   */
  waitMs?: number;
  headers?: Record<string, HeaderValue>;
  /**
   * Publish the request through this exchange, with the queue's name as routing key,
   * rather than straight to the queue: a broker user allowed to write to that exchange
   * only (docs/security.md) can then still make requests. It rejects `unroutable` when
   * the exchange does not exist or routes the request to no queue.
   */
  exchange?: string;
}

export interface IncomingRequest {
  readonly body: Buffer;
  readonly headers: Readonly<Record<string, unknown>>;
}

export type RequestHandler = (request: IncomingRequest) => Buffer | Promise<Buffer>;

export interface ServeOptions {
  /** Requests handled concurrently (default 32, enough for the ledger to batch them). */
  prefetch?: number;
}

export type BrokerEvent =
  /** The connection dropped; the broker is reconnecting. Publishes fail `disconnected` meanwhile. */
  | { type: 'connection_lost'; error: Error }
  /** Reconnected: topology re-declared, consumers that were not paused are consuming again. */
  | { type: 'connection_restored' }
  /**
   * After a reconnect the broker refused to declare again something declared before (e.g.
   * a binding to an exchange since deleted); the rest is set up.
   */
  | { type: 'redeclare_refused'; what: string; error: Error }
  /** The broker closed or cancelled one consumer (e.g. consumer timeout); it resumes by itself. */
  | { type: 'consumer_interrupted'; queue: string; reason: string }
  /** A consume or serve handler threw; the delivery was requeued (consume) or answered with the error (serve). */
  | { type: 'handler_failed'; queue: string; error: unknown };

export const BrokerErrorCode = {
  /** An RPC request got no reply in time. */
  timeout: 'timeout',
  /** The connection (or the channel) was lost with the operation in flight, or is down right now: retry. */
  disconnected: 'disconnected',
  /** This broker has been closed by its owner. */
  closed: 'closed',
  /** The broker refused to take responsibility for a published message. */
  publishNacked: 'publish_nacked',
  /** No queue has that name (a direct publish or request), or the requester of a reply is gone. */
  unroutable: 'unroutable',
  /** The exchange or queue an operation names does not exist. */
  notFound: 'not_found',
  /** The broker refused the operation (e.g. a queue redeclared with other properties). */
  refused: 'refused',
  /** The RPC server's handler threw. */
  remoteError: 'remote_error',
} as const;
export type BrokerErrorCode = (typeof BrokerErrorCode)[keyof typeof BrokerErrorCode];

export class BrokerError extends Error {
  override readonly name = 'BrokerError';
  constructor(
    readonly code: BrokerErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Recognises a BrokerError by name and code, so one rebuilt after crossing a process boundary counts too. */
export function isBrokerError(value: unknown, code?: BrokerErrorCode): value is BrokerError {
  if (!(value instanceof Error) || value.name !== 'BrokerError') return false;
  const actual = (value as { code?: unknown }).code;
  return typeof actual === 'string' && (code === undefined || actual === code);
}
