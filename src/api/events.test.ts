import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { JobEvents } from '../orchestrator/job-events.js';
import { waitFor } from '../../test/testing/wait.js';
import { call, readEventStream, withEmbeddedApi, type StreamedEvent } from '../../test/api/fixture.js';

/** Counts the listeners the API holds on `events`, so a test can see them all released. */
function countListeners(events: JobEvents): { readonly live: number } {
  const counter = { live: 0 };
  const onJob = events.onJob.bind(events);
  events.onJob = (jobId, listener) => {
    counter.live++;
    const stop = onJob(jobId, listener);
    return () => {
      counter.live--;
      stop();
    };
  };
  return counter;
}

describe('the job event stream', () => {
  it("follows a queued job's cancel to its end, with keep-alive comments while it is quiet", () =>
    withEmbeddedApi(
      async (api) => {
        const submitted = await call(api.app, 'POST', '/v1/jobs', { key: api.acmeKey, body: { type: 'probe', input: {} } });
        const events: StreamedEvent[] = [];
        const reading = readEventStream(api, submitted.body.id, api.acmeKey, { onEvent: (event) => events.push(event) });
        await waitFor('the first event', () => events.length > 0);
        // Quiet for several heartbeats before anything changes.
        await new Promise((resolve) => setTimeout(resolve, 250));
        await call(api.app, 'POST', `/v1/jobs/${submitted.body.id}/cancel`, { key: api.acmeKey });
        const stream = await reading;
        assert.deepEqual(
          stream.events.map((e) => [e.event, e.data.state, e.data.reason]),
          [
            ['state', 'queued', null],
            ['state', 'failed', 'cancelled'],
          ],
        );
        assert.ok(stream.comments >= 2, `${stream.comments} keep-alive comments`);
      },
      { eventHeartbeatMs: 50 },
    ));

  it('stops listening for the job when the client goes away, and when the stream ends', () =>
    withEmbeddedApi(async (api) => {
      const listeners = countListeners(api.harness.orchestrator.events);
      const submitted = await call(api.app, 'POST', '/v1/jobs', { key: api.acmeKey, body: { type: 'probe', input: {} } });
      const leaving = new AbortController();
      const reading = readEventStream(api, submitted.body.id, api.acmeKey, { signal: leaving.signal, onEvent: () => leaving.abort() });
      await reading;
      await waitFor('the listener to be released', () => listeners.live === 0);

      await call(api.app, 'POST', `/v1/jobs/${submitted.body.id}/cancel`, { key: api.acmeKey });
      const ended = await readEventStream(api, submitted.body.id, api.acmeKey);
      assert.equal(ended.events.length, 1);
      await waitFor('the listener to be released', () => listeners.live === 0);
    }));

  it("answers an unknown job's stream with a JSON 404, not an empty stream", () =>
    withEmbeddedApi(async (api) => {
      const response = await fetch(`${api.url}/v1/jobs/nope/events`, { headers: { authorization: `Bearer ${api.acmeKey}` } });
      assert.equal(response.status, 404);
      assert.deepEqual(await response.json(), { error: { code: 'not_found', message: 'no job nope' } });
    }));

  it('closing the server ends the open streams instead of waiting for their jobs', () =>
    withEmbeddedApi(async (api) => {
      const submitted = await call(api.app, 'POST', '/v1/jobs', { key: api.acmeKey, body: { type: 'probe', input: {} } });
      const events: StreamedEvent[] = [];
      const reading = readEventStream(api, submitted.body.id, api.acmeKey, { onEvent: (event) => events.push(event) });
      await waitFor('the first event', () => events.length > 0);
      const started = Date.now();
      await api.app.close();
      const stream = await reading;
      assert.equal(stream.events.length, 1);
      assert.ok(Date.now() - started < 1000, `closed in ${Date.now() - started} ms`);
    }));
});
