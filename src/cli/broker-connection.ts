import type { Broker } from '../broker/broker.js';
import { SocketBroker } from '../broker/embedded-socket-client.js';
import { RabbitMqBroker } from '../broker/rabbitmq.js';
import type { QueueType } from '../broker/rabbitmq-topology.js';
import { UsageError } from './options.js';

/**
 * The broker a separate planrun process talks to: RabbitMQ when a URL is given (see
 * amqpUrlFrom), else the embedded broker of a `planrun up` through its socket.
 */
export async function connectBroker(flags: { amqpUrl?: string | undefined; queueType?: QueueType; brokerSocket?: string }, command: string): Promise<Broker> {
  if (flags.amqpUrl) return RabbitMqBroker.connect({ url: flags.amqpUrl, ...(flags.queueType ? { queueType: flags.queueType } : {}) });
  const socket = flags.brokerSocket ?? process.env.PLANRUN_BROKER_SOCKET;
  if (socket) return SocketBroker.connect({ path: socket });
  throw new UsageError(
    `planrun ${command} needs a broker: --amqp-file PATH, PLANRUN_AMQP_URL or --amqp URL for RabbitMQ, or --broker-socket PATH for the embedded broker of a running \`planrun up\``,
  );
}
