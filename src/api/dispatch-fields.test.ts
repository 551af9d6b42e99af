/**
 * The dispatch fields through HTTP (docs/dispatch.md): a delayed submission is shown
 * `scheduled` with `waitingFor: "scheduled"` and can be cancelled before it starts; a job
 * of a tenant at its running limit says so; a runAt without its zone is a 400 naming it.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { EmbeddedBroker } from '../broker/embedded.js';
import { call, startApi, type ApiFixture } from '../../test/api/fixture.js';
import { waitFor } from '../../test/testing/wait.js';

describe('the dispatch fields of a submission, over HTTP', () => {
  const broker = new EmbeddedBroker();
  let api: ApiFixture;
  before(async () => {
    api = await startApi(broker.connect());
  });
  after(async () => {
    await api.close();
    await broker.close();
  });

  it('a delayed job is scheduled, says so, and cancels before it starts', async () => {
    const submitted = await call(api.app, 'POST', '/v1/jobs', { key: api.acmeKey, body: { type: 'probe', input: {}, delaySeconds: 3600, priority: 2 } });
    assert.equal(submitted.status, 202);
    assert.equal(submitted.body.state, 'scheduled');
    const shown = await call(api.app, 'GET', `/v1/jobs/${submitted.body.id}`, { key: api.acmeKey });
    assert.equal(shown.body.state, 'scheduled');
    assert.equal(shown.body.waitingFor, 'scheduled');
    const cancelled = await call(api.app, 'POST', `/v1/jobs/${submitted.body.id}/cancel`, { key: api.acmeKey });
    assert.equal(cancelled.body.state, 'failed');
    assert.equal(cancelled.body.reason, 'cancelled');
  });

  it('a job held back by its tenant limit, or with no free slot, says why it waits', async () => {
    await api.harness.ledger.setRunningLimit({ tenant: 'acme', maxRunning: 0 });
    const held = await call(api.app, 'POST', '/v1/jobs', { key: api.acmeKey, body: { type: 'probe', input: {} } });
    assert.equal(held.body.state, 'queued');
    await waitFor(
      'waitingFor tenant_limit',
      async () => (await call(api.app, 'GET', `/v1/jobs/${held.body.id}`, { key: api.acmeKey })).body.waitingFor === 'tenant_limit',
    );
    await api.harness.ledger.setRunningLimit({ tenant: 'acme', maxRunning: null });
    const shown = await call(api.app, 'GET', `/v1/jobs/${held.body.id}`, { key: api.acmeKey });
    assert.equal(shown.body.waitingFor, 'no_free_slot', 'no worker: no free slot');
  });

  it('refuses a runAt without its zone and a concurrencyLimit without a key, naming the field', async () => {
    const noZone = await call(api.app, 'POST', '/v1/jobs', { key: api.acmeKey, body: { type: 'probe', input: {}, runAt: '2026-12-01T18:00:00' } });
    assert.equal(noZone.status, 400);
    assert.match(noZone.body.error.message, /body\/runAt must be an ISO 8601 time with its zone/);
    const noKey = await call(api.app, 'POST', '/v1/jobs', { key: api.acmeKey, body: { type: 'probe', input: {}, concurrencyLimit: 2 } });
    assert.equal(noKey.status, 400);
    assert.match(noKey.body.error.message, /concurrencyLimit needs a concurrencyKey/);
  });
});
