/**
 * Issue 12: two orchestrators, A and B, each with its HTTP API, on one PostgreSQL ledger
 * and one broker. API keys live in the ledger: a key made through A is accepted by B, and
 * one revoked through B is refused by A at its very next request (no key is cached). A job
 * submitted on A is watched to its end on B's event stream, while the worker's control
 * requests reach A and B in turn.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { silentLogger } from '../core/logger.js';
import { KeyStore } from '../keys/key-store.js';
import { openPostgresLedger } from '../ledger/postgres/postgres-ledger.js';
import { fastTestUrl, TestSchemas } from '../../test/ledger/postgres/testing.js';
import { call, readEventStream, startEmbeddedApi } from '../../test/api/fixture.js';
import { waitFor } from '../../test/testing/wait.js';
import { buildApi } from './api.js';

describe('API keys and event streams shared by two orchestrators on one PostgreSQL ledger (issue 12)', () => {
  const schemas = new TestSchemas();
  after(() => schemas.dropAll());

  it('a key made on A works on B, a key revoked on B is refused on A at once, and a job submitted on A is watched to its end on B', async () => {
    const schema = schemas.reserve();
    const api = await startEmbeddedApi({
      openLedger: (config) => openPostgresLedger({ connectionString: fastTestUrl(), schema, config, poolSize: 4 }),
    });
    const [ledgerB, b] = await api.harness.startOrchestrator(api.connect());
    const keysB = new KeyStore(ledgerB);
    const appB = buildApi({ orchestrator: b, keys: keysB, broker: api.connect(), logger: silentLogger() });
    const urlB = await appB.listen({ host: '127.0.0.1', port: 0 });
    try {
      // api.acmeKey was made through A's ledger connection; B has never seen it.
      const made = await api.keys.create('initech');
      for (const key of [api.acmeKey, made.key]) {
        assert.equal((await call(appB, 'GET', '/v1/jobs', { key })).status, 200, 'a key made on A, accepted by B');
      }

      assert.equal(await keysB.revoke(made.id), 'revoked');
      const refused = await call(api.app, 'GET', '/v1/jobs', { key: made.key });
      assert.equal(refused.status, 401, 'revoked on B: refused by A at its next request');
      assert.equal((await call(appB, 'GET', '/v1/jobs', { key: made.key })).status, 401);
      assert.equal((await call(api.app, 'GET', '/v1/jobs', { key: api.acmeKey })).status, 200, 'other keys unaffected');

      await api.harness.startWorker(api.connect(), { slots: 1 });
      await waitFor('the worker on B', () => b.fleet.list().length === 1);
      const submitted = await call(api.app, 'POST', '/v1/jobs', {
        key: api.acmeKey,
        body: { type: 'probe', input: { ms: 600, steps: 3, runLog: api.harness.runLog } },
      });
      assert.equal(submitted.status, 202);
      const stream = await readEventStream({ url: urlB }, submitted.body.id, api.acmeKey, { timeoutMs: 20_000 });
      assert.equal(stream.status, 200);
      const states = stream.events.filter((e) => e.event === 'state').map((e) => e.data.state);
      assert.equal(states.at(-1), 'finished', 'B streamed the job to its end, and ended the stream');
      assert.ok(states.includes('running'), `B saw it run: ${states.join(', ')}`);
    } finally {
      await appB.close();
      await api.close();
    }
  });
});
