/**
 * Issue 12: two orchestrators on one PostgreSQL ledger. A job watched on A's event stream
 * and settled through B shows on A's stream as it commits: the ledger's change feed
 * (LISTEN/NOTIFY) tells A, not the stream's heartbeat (a minute here). When the feed's
 * connection is killed (pg_terminate_backend), A polls its watched jobs until the feed is
 * back, then hears changes as they commit again.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { Ledger } from '../ledger/ledger.js';
import { jobChangeChannel } from '../ledger/postgres/job-change-feed.js';
import { openPostgresLedger } from '../ledger/postgres/postgres-ledger.js';
import { fastTestUrl, TestSchemas } from '../../test/ledger/postgres/testing.js';
import { call, readEventStream, startEmbeddedApi, type StreamedEvent } from '../../test/api/fixture.js';
import { waitFor } from '../../test/testing/wait.js';

/** Settles `jobId` as finished through `ledger` (another orchestrator's pool), as its worker would. */
async function settleThrough(ledger: Ledger, jobId: string): Promise<void> {
  const grant = await ledger.grantLease({ jobId, attempt: 1, worker: 'worker-on-b', holderProof: 'proof' });
  assert.ok(grant.granted);
  const settled = await ledger.settle({ jobId, attempt: 1, token: grant.token, outcome: { kind: 'finished', result: { data: { on: 'b' }, outputs: {} } } });
  assert.ok(settled.accepted);
}

describe('event streams across orchestrators on one PostgreSQL ledger (issue 12)', () => {
  const schemas = new TestSchemas();
  after(() => schemas.dropAll());

  it("A's stream sees a job settled through B, from the change feed, and by polling while the feed is down", async () => {
    const schema = schemas.reserve();
    const api = await startEmbeddedApi({
      openLedger: (config) => openPostgresLedger({ connectionString: fastTestUrl(), schema, config, poolSize: 4, changeFeedRetryMs: 3000 }),
      // Far longer than the test waits: the heartbeat's look-again backstop plays no part.
      eventHeartbeatMs: 60_000,
      changePollMs: 100,
    });
    try {
      const [ledgerB] = await api.harness.startOrchestrator(api.connect());
      const a = api.harness.orchestrator;
      assert.equal(a.changeFeedLive, true);

      /** Submits on A, watches on A, settles through B; answers whether A's feed was live when the end showed. */
      const watchSettledOnB = async (): Promise<boolean> => {
        const submitted = await call(api.app, 'POST', '/v1/jobs', { key: api.acmeKey, body: { type: 'probe', input: {} } });
        assert.equal(submitted.status, 202);
        const events: StreamedEvent[] = [];
        let liveAtEnd: boolean | undefined;
        const reading = readEventStream(api, submitted.body.id, api.acmeKey, {
          timeoutMs: 10_000,
          onEvent: (event) => {
            events.push(event);
            if (event.data.state === 'finished') liveAtEnd = a.changeFeedLive;
          },
        });
        await waitFor('the first event', () => events.length > 0);
        await settleThrough(ledgerB, submitted.body.id);
        const stream = await reading;
        assert.deepEqual(stream.events.map((e) => [e.event, e.data.state]).at(-1), ['state', 'finished']);
        assert.equal(stream.events[0]?.data.state, 'queued');
        return liveAtEnd!;
      };

      assert.equal(await watchSettledOnB(), true, 'told by the change feed');

      const killed = await schemas.admin.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'planrun-job-changes' AND query = $1`,
        [`LISTEN "${jobChangeChannel(schema)}"`],
      );
      assert.equal(killed.rowCount, 2, "A's and B's feed connections");
      await waitFor("A's feed noticed", () => !a.changeFeedLive);
      assert.equal(await watchSettledOnB(), false, 'found by polling while the feed is down');

      await waitFor("A's feed back", () => a.changeFeedLive, 10_000);
      assert.equal(await watchSettledOnB(), true, 'told by the change feed again');
    } finally {
      await api.close();
    }
  });
});
