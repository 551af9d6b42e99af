/**
 * Issue 12: behind a load balancer, an orchestrator that cannot reach its PostgreSQL ledger
 * must say so on `GET /readyz` (503 naming the ledger), so that the balancer sends its
 * requests to the others, and say ready again once the network is back. The cut is a
 * fault proxy between the orchestrator and PostgreSQL; the broker's own cut is
 * api-rabbitmq.test.ts.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { openPostgresLedger } from '../ledger/postgres/postgres-ledger.js';
import { fastTestUrl, TestSchemas } from '../../test/ledger/postgres/testing.js';
import { call, startEmbeddedApi } from '../../test/api/fixture.js';
import { FaultProxy } from '../../test/testing/fault-proxy.js';
import { waitFor } from '../../test/testing/wait.js';

describe('readiness on a PostgreSQL ledger (issue 12)', () => {
  const schemas = new TestSchemas();
  after(() => schemas.dropAll());

  it('GET /readyz answers 503 naming the ledger while the network to PostgreSQL is cut, and 200 once it is back', async () => {
    const direct = new URL(fastTestUrl());
    const proxy = await FaultProxy.start({ host: direct.hostname, port: Number(direct.port || 5432) });
    const throughProxy = new URL(direct);
    throughProxy.hostname = '127.0.0.1';
    throughProxy.port = String(proxy.port);
    const schema = schemas.reserve();
    const api = await startEmbeddedApi({
      openLedger: (config) => openPostgresLedger({ connectionString: throughProxy.toString(), schema, config, poolSize: 4, queryTimeoutMs: 5_000 }),
    });
    try {
      assert.equal((await call(api.app, 'GET', '/readyz')).status, 200);
      proxy.blackhole();
      const down = await call(api.app, 'GET', '/readyz');
      assert.equal(down.status, 503);
      assert.equal(down.body.error.code, 'unavailable');
      assert.match(down.body.error.message, /^not ready: ledger: no answer within \d+ ms$/);
      proxy.heal();
      await waitFor('readyz to pass again', async () => (await call(api.app, 'GET', '/readyz')).status === 200, 15_000);
    } finally {
      proxy.heal();
      await api.close();
      await proxy.close();
    }
  });
});
