import { rabbitMqConnections } from '../testing/rabbitmq-connections.js';
import { workerBehaviour } from './behaviour.js';

workerBehaviour('RabbitMQ', rabbitMqConnections);
