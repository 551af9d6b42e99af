/**
 * One table of bad submissions, run against both ways in (issue 18, finding 4): HTTP
 * (`POST /v1/jobs`) and the submit queue on the real RabbitMQ. Each is refused on both,
 * for the same reason in the same words: a 400 (413 for size) naming it over HTTP, a dead
 * letter carrying it in `planrun-dead-reason` on the queue. Nothing is recorded.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { call, startApi, type ApiFixture } from '../../test/api/fixture.js';
import type { Broker } from '../broker/broker.js';
import { deadReasonHeader } from '../orchestrator/submit-consumer.js';
import { rabbitMqConnections } from '../../test/testing/rabbitmq-connections.js';
import { waitFor } from '../../test/testing/wait.js';
import { NAME_PATTERN, submissionLimits } from './rules.js';

/** `{"a":{"a":...{}}}`, `levels` objects deep, built without recursion. */
function nested(levels: number): unknown {
  let value: unknown = {};
  for (let level = 1; level < levels; level++) value = { a: value };
  return value;
}

const typeRule = `body/type must match pattern "${NAME_PATTERN}"`;
const tenantRule = (tenant: string) =>
  `tenant name ${JSON.stringify(tenant)} must start with a letter and hold only letters, digits, "-" and "_" (at most 64 characters)`;
const tooDeepToParse = `body is nested deeper than the limit of ${submissionLimits.bodyDepth} levels (an input may nest at most ${submissionLimits.inputDepth})`;

/** Bad tenants: over HTTP the API key decides the tenant, so HTTP refuses them when the key is made. */
const badTenants = ['t2.checksum.finished', 't2.#', 'acme.*', 'two words', 'caf\u00e9', '9lives', 'a'.repeat(65), 'sleep\n'];

/** Bad bodies (tenant `acme`), with the reason both paths must give. */
const badBodies: Array<{ name: string; body: Record<string, unknown>; reason: string; httpStatus?: number }> = [
  { name: 'a type of 250 characters', body: { type: 'y'.repeat(250), input: {} }, reason: typeRule },
  { name: 'a type with a newline', body: { type: 'sleep\n', input: {} }, reason: typeRule },
  { name: 'a type with a dot', body: { type: 'checksum.finished', input: {} }, reason: typeRule },
  { name: 'a type of #', body: { type: '#', input: {} }, reason: typeRule },
  { name: 'a type of *', body: { type: '*', input: {} }, reason: typeRule },
  { name: 'a type with a space', body: { type: 'check sum', input: {} }, reason: typeRule },
  { name: 'a non-ASCII type', body: { type: 'caf\u00e9', input: {} }, reason: typeRule },
  { name: 'a type of 65 characters', body: { type: 'a'.repeat(65), input: {} }, reason: typeRule },
  { name: 'maxAttempts 1e15', body: { type: 'checksum', input: {}, maxAttempts: 1e15 }, reason: 'body/maxAttempts must be <= 100' },
  { name: 'maxAttempts 0', body: { type: 'checksum', input: {}, maxAttempts: 0 }, reason: 'body/maxAttempts must be >= 1' },
  {
    name: 'a capability with a dot',
    body: { type: 'checksum', input: {}, requires: ['gpu.big'] },
    reason: `body/requires/0 must match pattern "${NAME_PATTERN}"`,
  },
  { name: 'an unknown field', body: { type: 'checksum', input: {}, urgency: 9 }, reason: 'body must NOT have property "urgency"' },
  {
    name: 'a 20 MB input',
    body: { type: 'checksum', input: { data: 'x'.repeat(20 * 1024 * 1024) } },
    reason: `body is larger than the limit of ${submissionLimits.bodyBytes} bytes`,
    httpStatus: 413,
  },
  { name: 'an input 65 levels deep', body: { type: 'checksum', input: nested(65) }, reason: 'body/input is nested deeper than the limit of 64 levels' },
  { name: 'an input 4,000 levels deep (8 KB)', body: { type: 'checksum', input: nested(4_000) }, reason: tooDeepToParse },
  { name: 'an input 100,000 levels deep', body: { type: 'checksum', input: nested(100_000) }, reason: tooDeepToParse },
];

/** Serialises without recursion, which JSON.stringify cannot do 100,000 levels deep. */
function toJson(body: Record<string, unknown>): string {
  const { input, ...rest } = body;
  let levels = 0;
  for (let value = input; typeof value === 'object' && value !== null && 'a' in value; value = value.a) levels++;
  const deep = levels > 1000 ? '{"a":'.repeat(levels) + '{}' + '}'.repeat(levels) : JSON.stringify(input);
  return JSON.stringify({ ...rest, input: '__INPUT__' }).replace('"__INPUT__"', deep);
}

describe('bad submissions are refused alike over HTTP and on the submit queue (RabbitMQ)', () => {
  let connections: Awaited<ReturnType<typeof rabbitMqConnections>>;
  let api: ApiFixture;
  let app: Broker;
  const dead = new Map<string, string>();

  before(async () => {
    connections = await rabbitMqConnections();
    api = await startApi(await connections.connect());
    app = await connections.connect();
    await app.consume(
      api.harness.topology.deadQueue,
      (delivery) => {
        dead.set(String(delivery.messageId), String(delivery.headers[deadReasonHeader]));
        delivery.ack();
      },
      { prefetch: 50 },
    );
  });
  after(async () => {
    await api.close();
    await connections.close();
  });

  async function refusedOnQueue(messageId: string, body: string): Promise<string> {
    await app.sendToQueue(api.harness.topology.submitQueue, Buffer.from(body), { messageId });
    return waitFor(`the dead letter of ${messageId}`, () => dead.get(messageId), 20_000);
  }

  for (const [index, tenant] of badTenants.entries()) {
    it(`tenant ${JSON.stringify(tenant)}: no key can be made for it, and the queue dead-letters it, for the same reason`, async () => {
      await assert.rejects(api.keys.create(tenant), { message: tenantRule(tenant) });
      const reason = await refusedOnQueue(`tenant-${index}`, JSON.stringify({ tenant, type: 'checksum', input: {} }));
      assert.equal(reason, tenantRule(tenant));
    });
  }

  for (const [index, { name, body, reason, httpStatus = 400 }] of badBodies.entries()) {
    it(`${name}: refused over HTTP and on the queue, for the same reason`, async () => {
      const json = toJson(body);
      const response = await api.app.inject({
        method: 'POST',
        url: '/v1/jobs',
        headers: { authorization: `Bearer ${api.acmeKey}`, 'content-type': 'application/json' },
        payload: json,
      });
      assert.equal(response.statusCode, httpStatus, response.body.slice(0, 300));
      assert.equal(response.json<{ error: { message: string } }>().error.message, reason);
      assert.equal(await refusedOnQueue(`body-${index}`, toJson({ tenant: 'acme', ...body })), reason);
    });
  }

  it('recorded none of them, and a good submission still goes through on both paths', async () => {
    assert.deepEqual((await api.harness.ledger.listJobs({})).jobs, []);
    const http = await call(api.app, 'POST', '/v1/jobs', { key: api.acmeKey, body: { type: 'checksum', input: nested(64), maxAttempts: 100 } });
    assert.equal(http.status, 202, JSON.stringify(http.body));
    await app.sendToQueue(api.harness.topology.submitQueue, Buffer.from(JSON.stringify({ tenant: 'acme', type: 'checksum', input: nested(64) })), {
      messageId: 'good-one',
    });
    await waitFor('the queued submission recorded', async () => (await api.harness.ledger.listJobs({ tenant: 'acme' })).jobs.length === 2);
    assert.equal(dead.has('good-one'), false);
  });
  it('a message id reused for another body is dead-lettered as an idempotency conflict, like HTTP answers 409, and its job is untouched', async () => {
    const first = await call(api.app, 'POST', '/v1/jobs', {
      key: api.acmeKey,
      body: { type: 'checksum', input: { v: 1 } },
      headers: { 'idempotency-key': 'reused-key' },
    });
    assert.equal(first.status, 202);
    const reason = await refusedOnQueue('reused-key', JSON.stringify({ tenant: 'acme', type: 'checksum', input: { v: 2 } }));
    assert.equal(reason, `idempotency key "reused-key" was used for job ${first.body.id} with another submission (its input differ)`);
    assert.deepEqual((await api.harness.ledger.getJob(first.body.id))?.input, { v: 1 });
  });
});
