import { BrokerError, isBrokerError } from './broker.js';

/** The AMQP reply code RabbitMQ closes a channel with when an exchange or queue is missing. */
const notFoundReplyCode = 404;

/**
 * Turns what amqplib throws into a BrokerError. Its errors carry a numeric AMQP reply code
 * when the broker refused something (the channel is then closed); anything else means the
 * channel or connection went away under the operation.
 */
export function brokerErrorFrom(error: unknown, what: string): BrokerError {
  if (isBrokerError(error)) return error;
  const message = error instanceof Error ? error.message : String(error);
  const replyCode = (error as { code?: unknown } | undefined)?.code;
  if (replyCode === notFoundReplyCode) return new BrokerError('not_found', `${what}: ${message}`, { cause: error });
  if (typeof replyCode === 'number') return new BrokerError('refused', `${what}: ${message}`, { cause: error });
  return new BrokerError('disconnected', `${what}: ${message}`, { cause: error });
}
