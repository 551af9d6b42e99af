/**
 * Fuzzing both ways in (issue 13): generated requests against the HTTP API (bodies,
 * headers, content types, encodings, deep, huge and odd JSON) and random messages on the
 * submit queue of the real RabbitMQ, each interleaved with good submissions. Never a 5xx,
 * never a crash, never a good submission lost next to bad ones, and every bad queue
 * message in the dead queue with its reason. Bounded: a fixed number of runs; the seed
 * is printed and replayable (test/fuzz/parameters.ts).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import type { InjectOptions } from 'fastify';
import { startApi, type ApiFixture } from '../../test/api/fixture.js';
import { fuzzParameters } from '../../test/fuzz/parameters.js';
import { rabbitMqConnections } from '../../test/testing/rabbitmq-connections.js';
import { waitFor } from '../../test/testing/wait.js';
import type { Broker } from '../broker/broker.js';
import { deadReasonHeader } from '../orchestrator/submit-consumer.js';
import { readQueuedSubmission } from '../submission/queued.js';

/** JSON text `levels` deep, of arrays or objects, never parsed by the generator itself. */
const deepJson = fc
  .tuple(fc.integer({ min: 1, max: 20_000 }), fc.boolean(), fc.boolean())
  .map(([levels, arrays, closed]) =>
    arrays ? '['.repeat(levels) + (closed ? ']'.repeat(levels) : '') : '{"a":'.repeat(levels) + '1' + (closed ? '}'.repeat(levels) : ''),
  );

/** A submission that is almost right: each field may be of the wrong kind, out of range or missing. */
const submissionLike = fc.record(
  {
    type: fc.oneof(fc.constant('probe'), fc.string({ maxLength: 80 }), fc.jsonValue()),
    input: fc.oneof(fc.jsonValue(), fc.string({ unit: 'binary', maxLength: 200 })),
    requires: fc.oneof(fc.array(fc.string({ maxLength: 70 }), { maxLength: 70 }), fc.jsonValue()),
    maxAttempts: fc.oneof(fc.integer(), fc.double(), fc.constant(1e15), fc.jsonValue()),
    tenant: fc.oneof(fc.constant('acme'), fc.string({ maxLength: 70 })),
    idempotencyKey: fc.string({ maxLength: 300 }),
    jobs: fc.array(fc.dictionary(fc.string({ maxLength: 12 }), fc.jsonValue({ maxDepth: 3 })), { maxLength: 5 }),
  },
  { requiredKeys: [] },
);

const body = fc.oneof(
  { weight: 3, arbitrary: submissionLike.map((value) => JSON.stringify(value)) },
  { weight: 2, arbitrary: fc.json({ maxDepth: 6 }) },
  { weight: 1, arbitrary: deepJson },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 2000 }).map((bytes) => Buffer.from(bytes)) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 500 }) },
  // Over the 1 MB body limit, or just under it: generated as its size (so a failure prints
  // in a line), made into a body only when sent.
  { weight: 1, arbitrary: fc.constantFrom(1024 * 1024 - 40, 1024 * 1024 + 1, 3 * 1024 * 1024).map((hugeInput) => ({ hugeInput })) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '',
      '\uFEFF{"type":"probe","input":{}}',
      'null',
      '[]',
      '"x"',
      '{"__proto__":{"x":1},"type":"probe","input":{}}',
      '{"type":"probe","input":{},"type":"x"}',
    ),
  },
);

const headerToken = fc.stringMatching(/^[a-z][a-z0-9-]{0,15}$/);
const headerValue = fc.stringMatching(/^[\x20-\x7e]{0,60}$/);

const request = fc.record({
  method: fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'),
  path: fc.oneof(
    fc.constantFrom('/v1/jobs', '/v1/jobs/batch', '/v1/uploads', '/v1/fleet', '/metrics', '/healthz', '/readyz', '/openapi.json'),
    fc.string({ maxLength: 120 }).map((id) => `/v1/jobs/${encodeURIComponent(id)}`),
    fc.string({ maxLength: 40 }).map((id) => `/v1/jobs/${encodeURIComponent(id)}/cancel`),
    fc
      .tuple(fc.string({ maxLength: 20 }), fc.string({ maxLength: 40 }))
      .map(([id, name]) => `/v1/jobs/${encodeURIComponent(id)}/outputs/${encodeURIComponent(name)}`),
    // A request line always has a path: an empty one is no request a client can send.
    fc.webPath().map((path) => (path.startsWith('/') ? path : `/${path}`)),
  ),
  query: fc.option(fc.webQueryParameters(), { nil: undefined }),
  key: fc.constantFrom('acme', 'admin', 'junk', 'none', 'basic'),
  contentType: fc.option(
    fc.oneof(
      fc.constantFrom(
        'application/json',
        'application/json; charset=utf-8',
        'application/json; charset="UTF-8"',
        'application/json; charset=latin1',
        'application/json;;;',
        'text/plain',
        'application/x-www-form-urlencoded',
        'multipart/form-data; boundary=x',
        'application/octet-stream',
      ),
      headerValue,
    ),
    { nil: undefined },
  ),
  contentEncoding: fc.option(fc.oneof(fc.constantFrom('gzip', 'deflate', 'br', 'identity', 'gzip, identity', ''), headerValue), { nil: undefined }),
  idempotencyKey: fc.option(fc.string({ maxLength: 300 }), { nil: undefined }),
  extra: fc.dictionary(headerToken, headerValue, { maxKeys: 4 }),
  body: fc.option(body, { nil: undefined }),
});

type FuzzRequest = typeof request extends fc.Arbitrary<infer T> ? T : never;

function authorization(api: ApiFixture, key: FuzzRequest['key']): string | undefined {
  return { acme: `Bearer ${api.acmeKey}`, admin: `Bearer ${api.adminKey}`, junk: 'Bearer prk_nope', none: undefined, basic: 'Basic dXNlcjpwYXNz' }[key];
}

function payloadOf(body: NonNullable<FuzzRequest['body']>): string | Buffer {
  return typeof body === 'object' && 'hugeInput' in body ? `{"type":"probe","input":"${'x'.repeat(body.hugeInput)}"}` : body;
}

function toInject(api: ApiFixture, generated: FuzzRequest): InjectOptions {
  const headers: Record<string, string> = { ...generated.extra };
  const auth = authorization(api, generated.key);
  if (auth !== undefined) headers.authorization = auth;
  if (generated.contentType !== undefined) headers['content-type'] = generated.contentType;
  if (generated.contentEncoding !== undefined) headers['content-encoding'] = generated.contentEncoding;
  if (generated.idempotencyKey !== undefined) headers['idempotency-key'] = generated.idempotencyKey;
  return {
    method: generated.method,
    url: generated.path + (generated.query ?? ''),
    headers,
    ...(generated.body === undefined || generated.method === 'GET' || generated.method === 'HEAD' ? {} : { payload: payloadOf(generated.body) }),
  };
}

describe('fuzzing the HTTP API and the submit queue (RabbitMQ)', () => {
  let connections: Awaited<ReturnType<typeof rabbitMqConnections>>;
  let api: ApiFixture;
  let app: Broker;
  const deadById = new Map<string, string>();
  const deadWithoutId: Array<{ body: Buffer; reason: string }> = [];

  before(async () => {
    connections = await rabbitMqConnections();
    // No rate limit: the fuzzer sends far more than a client would, and 429 is not what it looks for.
    api = await startApi(await connections.connect(), { rateLimit: 'off' });
    app = await connections.connect();
    await app.consume(
      api.harness.topology.deadQueue,
      (delivery) => {
        const reason = String(delivery.headers[deadReasonHeader]);
        if (delivery.messageId === undefined) deadWithoutId.push({ body: delivery.body, reason });
        else deadById.set(delivery.messageId, reason);
        delivery.ack();
      },
      { prefetch: 100 },
    );
  });
  after(async () => {
    await api.close();
    await connections.close();
  });

  it('HTTP: generated requests never get a 5xx, every error has the one shape, and good submissions among them are all recorded', async () => {
    let good = 0;
    const acknowledged: string[] = [];
    await fc.assert(
      fc.asyncProperty(fc.array(request, { minLength: 1, maxLength: 4 }), async (requests) => {
        for (const generated of requests) {
          const response = await api.app.inject(toInject(api, generated));
          const shown = `${generated.method} ${generated.path.slice(0, 80)} -> ${response.statusCode} ${response.body.slice(0, 200)}`;
          assert.ok(response.statusCode < 500, shown);
          if (response.statusCode >= 400 && generated.method !== 'HEAD') {
            const answer = response.json<{ error?: { code?: unknown; message?: unknown } }>();
            assert.equal(typeof answer.error?.code, 'string', shown);
            assert.equal(typeof answer.error?.message, 'string', shown);
          }
          // A good submission right after each bad request: it must be accepted and kept.
          const key = `good-http-${good++}`;
          const accepted = await api.app.inject({
            method: 'POST',
            url: '/v1/jobs',
            headers: { authorization: `Bearer ${api.acmeKey}`, 'content-type': 'application/json', 'idempotency-key': key },
            payload: { type: 'probe', input: { key } },
          });
          assert.equal(accepted.statusCode, 202, accepted.body);
          acknowledged.push(key);
        }
      }),
      fuzzParameters('HTTP API', 150),
    );
    const recorded = new Set<string>();
    for (let cursor: string | undefined, first = true; first || cursor !== undefined; first = false) {
      const page = await api.harness.ledger.listJobs({ tenant: 'acme', limit: 1000, ...(cursor === undefined ? {} : { cursor }) });
      for (const job of page.jobs) if (job.idempotencyKey !== null) recorded.add(job.idempotencyKey);
      cursor = page.nextCursor ?? undefined;
    }
    assert.deepEqual(
      acknowledged.filter((key) => !recorded.has(key)),
      [],
      'every acknowledged good submission is in the ledger',
    );
  });

  it('queue: random messages go to the dead queue with their reason, good ones among them are recorded', async () => {
    let sent = 0;
    const badMessage = fc.oneof(
      // Never JSON: a 0xff byte is no UTF-8 that JSON.parse takes at the start.
      fc.uint8Array({ maxLength: 3000 }).map((bytes) => Buffer.concat([Buffer.from([0xff]), Buffer.from(bytes)])),
      // A submission with a field sure to break a rule.
      fc
        .tuple(
          submissionLike,
          fc.constantFrom<Record<string, unknown>>(
            { type: 'no.dots' },
            { tenant: 'a.b' },
            { maxAttempts: 0 },
            { priority: 1 },
            { input: undefined },
            { requires: ['#'] },
          ),
        )
        .map(([value, breaking]) => Buffer.from(JSON.stringify({ tenant: 'acme', type: 'probe', input: {}, ...value, ...breaking }))),
      deepJson.filter((text) => text.length > 300).map((text) => Buffer.from(text)),
      fc.jsonValue({ maxDepth: 4 }).map((value) => Buffer.from(JSON.stringify(Array.isArray(value) ? value : [value]))),
    );
    const message = fc.record({ body: badMessage, withId: fc.boolean() });

    await fc.assert(
      fc.asyncProperty(fc.array(message, { minLength: 1, maxLength: 6 }), async (messages) => {
        const goodKeys: string[] = [];
        const expectedDead: Array<{ id: string | undefined; body: Buffer }> = [];
        for (const { body, withId } of messages) {
          assert.equal(typeof readQueuedSubmission(body), 'string', 'the generator makes only bad bodies');
          const id = withId ? `bad-${sent++}` : undefined;
          await app.sendToQueue(api.harness.topology.submitQueue, body, id === undefined ? {} : { messageId: id });
          expectedDead.push({ id, body });
          const goodKey = `good-queue-${sent++}`;
          await app.sendToQueue(api.harness.topology.submitQueue, Buffer.from(JSON.stringify({ tenant: 'globex', type: 'probe', input: { goodKey } })), {
            messageId: goodKey,
          });
          goodKeys.push(goodKey);
        }
        for (const { id, body } of expectedDead) {
          const reason = await waitFor(`the dead letter of ${id ?? 'a message without an id'}`, () => {
            if (id !== undefined) return deadById.get(id);
            const index = deadWithoutId.findIndex((dead) => dead.body.equals(body));
            return index < 0 ? undefined : deadWithoutId.splice(index, 1)[0]!.reason;
          });
          const expected = id === undefined ? /^the message id must be set/ : (readQueuedSubmission(body) as string);
          if (typeof expected === 'string') assert.equal(reason, expected);
          else assert.match(reason, expected);
        }
        for (const key of goodKeys) {
          await waitFor(`good submission ${key} recorded`, async () => {
            const jobs = (await api.harness.ledger.listJobs({ tenant: 'globex', limit: 1000 })).jobs;
            return jobs.some((job) => job.idempotencyKey === key);
          });
        }
      }),
      fuzzParameters('submit queue', 40),
    );
    assert.equal(deadWithoutId.length, 0, 'no dead letter that was not expected');
  });
});
