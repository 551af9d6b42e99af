import type { Broker } from '../../src/broker/broker.js';
import { RabbitMqBroker } from '../../src/broker/rabbitmq.js';
import { rabbitMqUrl } from './services.js';

/** Opens connections to the test RabbitMQ on demand, and closes them all at the end. */
export async function rabbitMqConnections(): Promise<{ connect(): Promise<Broker>; close(): Promise<void> }> {
  const opened: Broker[] = [];
  return {
    connect: async () => {
      const broker = await RabbitMqBroker.connect({ url: rabbitMqUrl, heartbeatSeconds: 2 });
      opened.push(broker);
      return broker;
    },
    close: async () => {
      await Promise.all(opened.map((broker) => broker.close()));
    },
  };
}
