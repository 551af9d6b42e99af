/**
 * The least-privilege broker users of `planrun rabbitmq permissions`, made for real on
 * RabbitMQ by its `--apply` (names unique to this run, removed afterwards): a worker with
 * the worker grant runs jobs end to end and the broker refuses it everything else; an
 * app submits through the submit exchange and reads its own tenant's results only; with
 * the tenant taken from the broker user, an app cannot submit for another tenant.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import amqp, { type Channel, type ChannelModel, type ConfirmChannel } from 'amqplib';
import { RabbitMqBroker } from '../broker/rabbitmq.js';
import { deadReasonHeader } from '../orchestrator/submit-consumer.js';
import { Topology } from '../topology.js';
import { Harness } from '../../test/testing/harness.js';
import { rabbitMqUrl } from '../../test/testing/services.js';
import { waitFor } from '../../test/testing/wait.js';
import { cliPath } from '../../test/testing/worker-process.js';
import { appQueue } from './rabbitmq-roles.js';
import { deleteUsers, passwordVariable } from './rabbitmqctl.js';

const run = randomBytes(3).toString('hex');
const users = {
  orchestrator: `perm${run}-orchestrator`,
  worker: `perm${run}-worker`,
  acme: `perm${run}-acme`,
  globex: `perm${run}-globex`,
};
const tenantMap = new Map([
  [users.acme, 'acme'],
  [users.globex, 'globex'],
]);

function urlFor(user: string, password: string): string {
  const url = new URL(rabbitMqUrl);
  url.username = user;
  url.password = password;
  return url.toString();
}

/** Runs `operation` on a fresh channel of `connection` and resolves with the AMQP code the broker closed the channel with. */
async function refusal(connection: ChannelModel, operation: (channel: ConfirmChannel) => Promise<unknown>): Promise<{ code: number; message: string }> {
  const channel = await connection.createConfirmChannel();
  const closed = new Promise<{ code: number; message: string }>((resolve) =>
    channel.once('error', (error: Error & { code: number }) => resolve({ code: error.code, message: error.message })),
  );
  await operation(channel).catch(() => undefined);
  return closed;
}

function publish(channel: ConfirmChannel, exchange: string, routingKey: string, body: unknown, options: amqp.Options.Publish = {}): Promise<void> {
  return new Promise((resolve, reject) =>
    channel.publish(exchange, routingKey, Buffer.from(JSON.stringify(body)), { persistent: true, ...options }, (error: Error | null) =>
      error ? reject(error) : resolve(),
    ),
  );
}

describe('least-privilege RabbitMQ users (rabbitmq permissions)', () => {
  const topology = new Topology(`perm${run}`);
  let harness: Harness;
  const passwords = new Map<string, string>();
  const opened: Array<{ close(): Promise<void> }> = [];
  let admin: ChannelModel;
  let acme: ChannelModel;
  let acmeChannel: ConfirmChannel;
  let worker: ChannelModel;

  const connectAs = async (user: string) => {
    const connection = await amqp.connect(urlFor(user, passwords.get(user)!));
    connection.on('error', () => undefined);
    opened.push(connection);
    return connection;
  };

  before(async () => {
    // As an operator would: the worker's password from the environment, the others generated and printed once.
    const workerPassword = randomBytes(12).toString('hex');
    const applied = spawnSync(
      process.execPath,
      [
        cliPath,
        'rabbitmq',
        'permissions',
        '--apply',
        '--prefix',
        topology.prefix,
        '--orchestrator-user',
        users.orchestrator,
        '--worker-user',
        users.worker,
        ...[...tenantMap].flatMap(([user, tenant]) => ['--app', `${user}=${tenant}`]),
      ],
      { encoding: 'utf8', timeout: 120_000, env: { ...process.env, [passwordVariable(users.worker)]: workerPassword } },
    );
    assert.equal(applied.status, 0, applied.stderr);
    for (const [, user, password] of applied.stdout.matchAll(/^applied: created (\S+), password (\S+) /gm)) passwords.set(user!, password!);
    assert.match(applied.stdout, new RegExp(`^applied: created ${users.worker}, password ${workerPassword} `, 'm'));
    assert.deepEqual([...passwords.keys()].sort(), Object.values(users).sort(), applied.stdout);
    admin = await amqp.connect(rabbitMqUrl);
    const orchestratorBroker = await RabbitMqBroker.connect({ url: urlFor(users.orchestrator, passwords.get(users.orchestrator)!) });
    opened.push(orchestratorBroker);
    harness = await new Harness({ prefix: topology.prefix, broker: orchestratorBroker, submitTenant: { from: 'user-id', tenantMap } }).start();
    const workerBroker = await RabbitMqBroker.connect({ url: urlFor(users.worker, passwords.get(users.worker)!) });
    opened.push(workerBroker);
    await harness.startWorker(workerBroker);
    acme = await connectAs(users.acme);
    acmeChannel = await acme.createConfirmChannel();
    await acmeChannel.assertQueue(appQueue(topology, users.acme), { durable: true });
    await acmeChannel.bindQueue(appQueue(topology, users.acme), topology.resultsExchange, 'acme.#');
    worker = await connectAs(users.worker);
  });

  after(async () => {
    await harness.close();
    for (const connection of opened.reverse()) await connection.close().catch(() => undefined);
    const cleanup = await admin.createChannel();
    await cleanup.deleteQueue(appQueue(topology, users.acme));
    await admin.close();
    await deleteUsers(Object.values(users));
  });

  it('a worker with the worker grant runs a job end to end; the app submits through the submit exchange and reads its result', async () => {
    await publish(
      acmeChannel,
      topology.submitExchange,
      '',
      { tenant: 'acme', type: 'probe', input: { ms: 10, runLog: harness.runLog } },
      {
        messageId: 'acme-order-1',
        userId: users.acme,
      },
    );
    const readChannel: Channel = await acme.createChannel();
    const message = await waitFor(
      'the result on the app queue',
      async () => (await readChannel.get(appQueue(topology, users.acme), { noAck: true })) || undefined,
    );
    const result = JSON.parse(message.content.toString()) as { tenant: string; state: string };
    assert.equal(message.fields.routingKey, 'acme.probe.finished');
    assert.deepEqual([result.tenant, result.state], ['acme', 'finished']);
    assert.equal(harness.runs().length, 1, 'the worker ran it');
  });

  it('the broker refuses the worker user everything but its work and the control exchange: 403 ACCESS_REFUSED', async () => {
    const attempts: Array<[string, (channel: ConfirmChannel) => Promise<unknown>]> = [
      ['publish a result', (c) => publish(c, topology.resultsExchange, 'acme.probe.finished', { forged: true })],
      ['publish to the submit exchange', (c) => publish(c, topology.submitExchange, '', { tenant: 'acme', type: 'probe', input: {} })],
      ['publish to the submit queue', (c) => publish(c, '', topology.submitQueue, { tenant: 'acme', type: 'probe', input: {} })],
      ['publish to a work queue', (c) => publish(c, '', topology.workQueue('probe'), { forged: true })],
      ['read the control queue', (c) => c.consume(topology.controlQueue, () => undefined)],
      ['declare a queue', (c) => c.assertQueue(`${topology.prefix}.work.mine`, { durable: true })],
    ];
    for (const [what, attempt] of attempts) {
      const { code, message } = await refusal(worker, attempt);
      assert.equal(code, 403, `${what}: ${message}`);
      assert.match(message, /ACCESS_REFUSED/, what);
    }
  });

  it("an app user reads only its own tenant's results and cannot publish past the submit exchange", async () => {
    const own = appQueue(topology, users.acme);
    const attempts: Array<[string, (channel: ConfirmChannel) => Promise<unknown>]> = [
      ['bind to every result', (c) => c.bindQueue(own, topology.resultsExchange, '#')],
      ["bind to another tenant's results", (c) => c.bindQueue(own, topology.resultsExchange, 'globex.#')],
      ['declare a queue not its own', (c) => c.assertQueue(appQueue(topology, users.globex), { durable: true })],
      ['publish to the submit queue through the default exchange', (c) => publish(c, '', topology.submitQueue, {}, { messageId: 'x' })],
      ['publish a result', (c) => publish(c, topology.resultsExchange, 'acme.probe.finished', {})],
    ];
    for (const [what, attempt] of attempts) {
      const { code, message } = await refusal(acme, attempt);
      assert.equal(code, 403, `${what}: ${message}`);
    }
    const spoofed = await refusal(acme, (c) => publish(c, topology.submitExchange, '', {}, { messageId: 'x', userId: users.globex }));
    assert.equal(spoofed.code, 406, `RabbitMQ checks user_id against the connection's user: ${spoofed.message}`);
  });

  it('with --submit-tenant-from user-id, a submission for another tenant, or without user_id, is dead-lettered with its reason', async () => {
    const body = { type: 'probe', input: { ms: 10, runLog: harness.runLog } };
    await publish(acmeChannel, topology.submitExchange, '', { ...body, tenant: 'globex' }, { messageId: 'as-globex', userId: users.acme });
    await publish(acmeChannel, topology.submitExchange, '', { ...body, tenant: 'acme' }, { messageId: 'anonymous' });
    const dead = await admin.createChannel();
    const letters = new Map<string, string>();
    await waitFor('two dead letters', async () => {
      const message = await dead.get(topology.deadQueue, { noAck: true });
      if (message) letters.set(String(message.properties.messageId), String(message.properties.headers?.[deadReasonHeader]));
      return letters.size === 2;
    });
    assert.match(letters.get('as-globex')!, new RegExp(`claims tenant "globex", but the broker user "${users.acme}" submits for tenant "acme"`));
    assert.match(letters.get('anonymous')!, /user_id property must be set/);
    const { jobs } = await harness.ledger.listJobs({ limit: 10 });
    assert.deepEqual(
      jobs.map((job) => job.tenant),
      ['acme'],
      'only the first test’s job exists',
    );
  });
});
