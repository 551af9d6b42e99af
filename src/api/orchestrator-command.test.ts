import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { RabbitMqBroker } from '../broker/rabbitmq.js';
import { freePort } from '../../test/testing/free-port.js';
import { createKey } from '../../test/testing/keys.js';
import { rabbitMqUrl } from '../../test/testing/services.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { waitFor } from '../../test/testing/wait.js';
import { Topology } from '../topology.js';

const planrun = fileURLToPath(new URL('../cli/main.js', import.meta.url));

describe('planrun orchestrator serves the HTTP API', () => {
  it('listens on --host/--port (metrics on --metrics-port), logs the URL, takes keys from its data dir, limits submissions to --rate-limit, and closes on SIGTERM', async () => {
    const dir = tempDir('planrun-orchestrator-api-');
    const topology = new Topology(`t${randomBytes(4).toString('hex')}`);
    const port = await freePort();
    const metricsPort = await freePort();
    const key = await createKey(dir.path, 'acme');
    const child = spawn(
      process.execPath,
      [
        planrun,
        'orchestrator',
        '--amqp',
        rabbitMqUrl,
        '--data-dir',
        dir.path,
        '--host',
        '127.0.0.1',
        '--port',
        String(port),
        '--metrics-port',
        String(metricsPort),
        '--prefix',
        topology.prefix,
        '--rate-limit',
        '1/min',
      ],
      { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, PLANRUN_LOG_LEVEL: 'info' } },
    );
    let log = '';
    child.stderr.on('data', (chunk: Buffer) => (log += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    try {
      const url = `http://127.0.0.1:${port}`;
      await waitFor('the listening log line', () => log.includes(`HTTP API on ${url}`), 10_000);
      assert.equal((await fetch(`${url}/readyz`)).status, 200);
      const submit = () =>
        fetch(`${url}/v1/jobs`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ type: 'probe', input: {} }),
        });
      const submitted = await submit();
      assert.equal(submitted.status, 202);
      assert.equal(((await submitted.json()) as { tenant: string }).tenant, 'acme');
      const limited = await submit();
      assert.equal(limited.status, 429);
      assert.ok(Number(limited.headers.get('retry-after')) > 0);
      assert.equal(((await limited.json()) as { error: { code: string } }).error.code, 'rate_limited');
      assert.equal((await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).status, 200);

      child.kill('SIGTERM');
      assert.equal(await exited, 0, log);
      await assert.rejects(fetch(`${url}/healthz`), 'nothing listens any more');
    } finally {
      child.kill('SIGKILL');
      const broker = await RabbitMqBroker.connect({ url: rabbitMqUrl });
      for (const queue of [topology.controlQueue, topology.submitQueue, topology.deadQueue, topology.workQueue('probe')]) {
        await broker.deleteQueue(queue).catch(() => undefined);
      }
      for (const exchange of topology.exchanges) await broker.deleteExchange(exchange).catch(() => undefined);
      await broker.close();
      dir.remove();
    }
  });
});
