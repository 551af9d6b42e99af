import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RabbitMqBroker } from '../broker/rabbitmq.js';
import { rabbitMqConnections } from '../../test/testing/rabbitmq-connections.js';
import { rabbitMqUrl } from '../../test/testing/services.js';
import { FaultProxy } from '../../test/testing/fault-proxy.js';
import { waitFor } from '../../test/testing/wait.js';
import { apiBehaviour } from '../../test/api/api-behaviour.js';
import { call, startApi } from '../../test/api/fixture.js';

apiBehaviour('RabbitMQ', rabbitMqConnections);

describe('readiness on RabbitMQ', () => {
  it('GET /readyz answers 503 naming the broker while its connection is cut, and 200 once it is back', async () => {
    const rabbit = new URL(rabbitMqUrl);
    const proxy = await FaultProxy.start({ host: rabbit.hostname, port: Number(rabbit.port || 5672) });
    const broker = await RabbitMqBroker.connect({
      url: `amqp://${rabbit.username}:${rabbit.password}@127.0.0.1:${proxy.port}`,
      heartbeatSeconds: 1,
      connectTimeoutMs: 500,
      retry: { initialMs: 50, maxMs: 200 },
    });
    const api = await startApi(broker);
    try {
      assert.equal((await call(api.app, 'GET', '/readyz')).status, 200);
      proxy.blackhole();
      const down = await waitFor('readyz to fail', async () => {
        const answer = await call(api.app, 'GET', '/readyz');
        return answer.status === 503 ? answer : undefined;
      });
      assert.equal(down.body.error.code, 'unavailable');
      assert.match(down.body.error.message, /broker: connection lost/);
      proxy.heal();
      await waitFor('readyz to pass again', async () => (await call(api.app, 'GET', '/readyz')).status === 200);
    } finally {
      proxy.heal();
      await api.close();
      await broker.close();
      await proxy.close();
    }
  });
});
