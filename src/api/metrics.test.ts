import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { EmbeddedBroker } from '../broker/embedded.js';
import { silentLogger } from '../core/logger.js';
import { OrchestratorService } from '../deploy/orchestrator-service.js';
import { defaultLedgerConfig } from '../ledger/ledger.js';
import { freePort } from '../../test/testing/free-port.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { Topology } from '../topology.js';

/** The orchestrator process as `planrun orchestrator` assembles it, on an embedded broker. */
async function startService(metrics?: { host: string; port: number }) {
  const broker = new EmbeddedBroker();
  const dir = tempDir('planrun-metrics-');
  const service = await OrchestratorService.start({
    dataDir: dir.path,
    broker: broker.connect(),
    topology: new Topology('planrun'),
    logger: silentLogger(),
    ledgerConfig: defaultLedgerConfig,
    sweepIntervalMs: 1000,
    host: '127.0.0.1',
    port: await freePort(),
    ...(metrics ? { metrics } : {}),
  });
  return {
    service,
    acmeKey: (await service.keys.create('acme')).key,
    globexKey: (await service.keys.create('globex')).key,
    async close() {
      await service.stop();
      await broker.close();
      dir.remove();
    },
  };
}

async function submit(url: string, key: string, type: string): Promise<void> {
  const response = await fetch(`${url}/v1/jobs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ type, input: {} }),
  });
  assert.equal(response.status, 202);
}

describe('GET /metrics on the API port', () => {
  let stack: Awaited<ReturnType<typeof startService>>;
  before(async () => {
    stack = await startService();
  });
  after(() => stack.close());

  it("needs a key, and shows no tenant's job type names even with one", async () => {
    const { service } = stack;
    await submit(service.url, stack.globexKey, 'globex-secret-plan');
    assert.equal(service.metricsUrl, `${service.url}/metrics`);

    const anonymous = await fetch(`${service.url}/metrics`);
    assert.equal(anonymous.status, 401);
    const refusal = await anonymous.text();
    assert.doesNotMatch(refusal, /globex-secret-plan/);
    assert.equal(JSON.parse(refusal).error.code, 'unauthorized');

    const keyed = await fetch(`${service.url}/metrics`, { headers: { authorization: `Bearer ${stack.acmeKey}` } });
    assert.equal(keyed.status, 200);
    assert.match(keyed.headers.get('content-type') ?? '', /^text\/plain/);
    const text = await keyed.text();
    assert.doesNotMatch(text, /globex-secret-plan/, 'no worker offers the type, so it is no label');
    assert.match(text, /^planrun_jobs_submitted_total\{type="_other"\} 1$/m);
  });

  it('is documented in the OpenAPI document as needing the key', async () => {
    const openapi = (await (await fetch(`${stack.service.url}/openapi.json`)).json()) as { paths: Record<string, any> };
    assert.deepEqual(openapi.paths['/metrics'].get.security, [{ apiKey: [] }]);
  });
});

describe('--metrics-port: a metrics listener of its own', () => {
  it('serves GET /metrics without a key, only that, and the API port no longer serves them', async () => {
    const port = await freePort();
    const stack = await startService({ host: '127.0.0.1', port });
    try {
      const { service } = stack;
      assert.equal(service.metricsUrl, `http://127.0.0.1:${port}/metrics`);
      const scraped = await fetch(service.metricsUrl);
      assert.equal(scraped.status, 200);
      assert.match(await scraped.text(), /^planrun_jobs\{state="queued"\} 0$/m);

      assert.equal((await fetch(`http://127.0.0.1:${port}/v1/jobs`, { headers: { authorization: `Bearer ${stack.acmeKey}` } })).status, 404);
      const onApiPort = await fetch(`${service.url}/metrics`, { headers: { authorization: `Bearer ${stack.acmeKey}` } });
      assert.equal(onApiPort.status, 404, 'no tenant key reads fleet-wide counts');
    } finally {
      await stack.close();
    }
  });
});
