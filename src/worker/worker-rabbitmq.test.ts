import type { Broker } from '../broker/broker.js';
import { RabbitMqBroker } from '../broker/rabbitmq.js';
import { rabbitMqUrl } from '../testing/services.js';
import { workerBehaviour } from './behaviour.js';

workerBehaviour('RabbitMQ', async () => {
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
});
