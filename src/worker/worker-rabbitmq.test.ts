import { rabbitMqConnections } from '../../test/testing/rabbitmq-connections.js';
import { workerBehaviour } from '../../test/worker/behaviour.js';

workerBehaviour('RabbitMQ', rabbitMqConnections);
