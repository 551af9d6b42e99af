import type { Broker } from '../broker/broker.js';
import { SocketBroker } from '../broker/embedded-socket-client.js';
import { RabbitMqBroker } from '../broker/rabbitmq.js';
import { UsageError } from './options.js';

/**
 * The broker a separate planrun process talks to: RabbitMQ when a URL is given (flag or
 * PLANRUN_AMQP_URL), else the embedded broker of a `planrun up` through its socket.
 */
export async function connectBroker(flags: { amqp?: string; brokerSocket?: string }, command: string): Promise<Broker> {
  const url = flags.amqp ?? process.env.PLANRUN_AMQP_URL;
  if (url) return RabbitMqBroker.connect({ url });
  const socket = flags.brokerSocket ?? process.env.PLANRUN_BROKER_SOCKET;
  if (socket) return SocketBroker.connect({ path: socket });
  throw new UsageError(
    `planrun ${command} needs a broker: --amqp URL (or PLANRUN_AMQP_URL) for RabbitMQ, or --broker-socket PATH for the embedded broker of a running \`planrun up\``,
  );
}
