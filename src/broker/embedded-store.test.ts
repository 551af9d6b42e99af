import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { tempDir } from '../../test/testing/temp-dir.js';
import type { Broker } from './broker.js';
import { brokerConformance } from '../../test/broker/conformance.js';
import { EmbeddedBroker } from './embedded.js';
import { EmbeddedBrokerStore } from './embedded-store.js';
import { eventually, Inbox } from '../../test/broker/testkit.js';

const childScript = fileURLToPath(new URL('../../test/broker/embedded-store-fixture-child.js', import.meta.url));

brokerConformance('embedded with a store', async () => {
  const dir = tempDir('planrun-store-');
  const core = new EmbeddedBroker({ store: EmbeddedBrokerStore.open(join(dir.path, 'broker.db')) });
  return {
    connect: async () => core.connect(),
    close: async () => {
      await core.close();
      dir.remove();
    },
  };
});

/** A broker on the store at `path`, as a restarted `planrun up` would open it. */
function open(path: string): EmbeddedBroker {
  return new EmbeddedBroker({ store: EmbeddedBrokerStore.open(path) });
}

/** What a consumer receives from `queue` within a short while, acking nothing. */
async function drain(broker: Broker, queue: string, expected: number) {
  const inbox = new Inbox(false);
  const subscription = await broker.consume(queue, inbox.handler, { prefetch: 1000 });
  await inbox.waitFor(expected, 2000);
  await subscription.cancel();
  return inbox.deliveries;
}

function rowCount(path: string): number {
  const db = new Database(path, { readonly: true });
  try {
    return (db.prepare('SELECT COUNT(*) AS n FROM messages').get() as { n: number }).n;
  } finally {
    db.close();
  }
}

describe('EmbeddedBroker with a store', () => {
  it('keeps queues, bindings and waiting messages across a restart, and marks the messages redelivered', async () => {
    const dir = tempDir('planrun-store-');
    const path = join(dir.path, 'broker.db');
    try {
      const first = open(path);
      const broker = first.connect();
      await broker.declareQueue('results');
      await broker.declareTopicExchange('planrun.results');
      await broker.bindQueue('results', 'planrun.results', 'acme.#');
      await broker.publish('planrun.results', 'acme.render.finished', Buffer.from('{"id":"j1"}'), {
        messageId: 'j1',
        headers: { 'planrun-tenant': 'acme', n: 1, ok: true },
      });
      await broker.sendToQueue('results', Buffer.from('direct'), { messageId: 'j2' });
      await broker.publish('planrun.results', 'globex.render.finished', Buffer.from('not bound'), { messageId: 'j3' });
      await first.close();

      const second = open(path);
      const again = second.connect();
      const deliveries = await drain(again, 'results', 2);
      assert.deepEqual(
        deliveries.map((d) => [d.messageId, d.body.toString(), d.routingKey, d.redelivered, d.headers]),
        [
          ['j1', '{"id":"j1"}', 'acme.render.finished', true, { 'planrun-tenant': 'acme', n: 1, ok: true }],
          ['j2', 'direct', 'results', true, {}],
        ],
      );
      // The binding came back too: a new publish is routed, and lands after the restored ones.
      await again.publish('planrun.results', 'acme.render.failed', Buffer.from('new'), { messageId: 'j4' });
      const all = await drain(again, 'results', 3);
      assert.deepEqual(
        all.map((d) => d.messageId),
        ['j1', 'j2', 'j4'],
      );
      await second.close();
    } finally {
      dir.remove();
    }
  });

  it('forgets what was acked, dropped, expired or deleted', async () => {
    const dir = tempDir('planrun-store-');
    const path = join(dir.path, 'broker.db');
    try {
      const first = open(path);
      const broker = first.connect();
      for (const queue of ['kept', 'gone']) await broker.declareQueue(queue);
      await broker.declareTopicExchange('ex');
      await broker.bindQueue('gone', 'ex', '#');
      for (const id of ['ack', 'drop', 'requeue', 'keep']) await broker.sendToQueue('kept', Buffer.from(id), { messageId: id });
      await broker.sendToQueue('kept', Buffer.from('old'), { messageId: 'expired', expirationMs: 1 });
      await broker.sendToQueue('gone', Buffer.from('x'), { messageId: 'in-deleted-queue' });
      await new Promise((resolve) => setTimeout(resolve, 20));
      const seen: string[] = [];
      await broker.consume(
        'kept',
        (delivery) => {
          seen.push(delivery.messageId!);
          if (delivery.messageId === 'ack') delivery.ack();
          else if (delivery.messageId === 'drop') delivery.nack({ requeue: false });
          else if (delivery.messageId === 'requeue' && !delivery.redelivered) delivery.nack({ requeue: true });
        },
        { prefetch: 10 },
      );
      await eventually('the requeued message delivered again', () => seen.filter((id) => id === 'requeue').length === 2 && seen.includes('keep'));
      await broker.deleteQueue('gone');
      await first.close();

      const second = open(path);
      const again = second.connect();
      assert.deepEqual(
        (await drain(again, 'kept', 2)).map((d) => d.messageId),
        ['requeue', 'keep'],
      );
      await assert.rejects(
        again.consume('gone', () => undefined, { prefetch: 1 }),
        /no queue named gone/,
      );
      await second.close();
      assert.equal(rowCount(path), 2);
    } finally {
      dir.remove();
    }
  });

  it('does not store RPC requests: their reply address dies with the broker', async () => {
    const dir = tempDir('planrun-store-');
    const path = join(dir.path, 'broker.db');
    try {
      const core = open(path);
      const client = core.connect();
      await client.declareQueue('control');
      const pending = client.request('control', Buffer.from('lease?'), { timeoutMs: 60_000 }).catch(() => 'closed');
      await client.sendToQueue('control', Buffer.from('plain'), { messageId: 'plain' });
      assert.equal(rowCount(path), 1);
      await core.close();
      assert.equal(await pending, 'closed');
    } finally {
      dir.remove();
    }
  });

  it('loses no confirmed publish when its process is killed with SIGKILL mid-stream', async () => {
    const dir = tempDir('planrun-store-');
    const path = join(dir.path, 'broker.db');
    try {
      const child = spawn(process.execPath, [childScript, path, 'submit'], { stdio: ['ignore', 'pipe', 'pipe'] });
      let output = '';
      child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
      const exited = new Promise((resolve) => child.once('exit', resolve));
      await eventually(
        () => `500 confirmed publishes; the child printed: ${output.slice(0, 500)}`,
        () => output.split('\n').length > 500,
        20_000,
      );
      child.kill('SIGKILL');
      await exited;
      const confirmed = output.split('\n').filter((line) => line.startsWith('m-'));

      const core = open(path);
      const deliveries = await drain(core.connect(), 'submit', confirmed.length);
      const stored = new Set(deliveries.map((d) => d.messageId));
      assert.deepEqual(
        confirmed.filter((id) => !stored.has(id)),
        [],
        'every confirmed message is still queued',
      );
      assert.ok(deliveries.every((d) => d.body.toString() === `body of ${d.messageId}` && d.headers.n === d.messageId));
      await core.close();
    } finally {
      dir.remove();
    }
  });

  it('refuses a store from a newer planrun, and a file that is not one, naming the file', () => {
    const dir = tempDir('planrun-store-');
    try {
      const newer = join(dir.path, 'newer.db');
      const db = new Database(newer);
      db.pragma('user_version = 99');
      db.close();
      assert.throws(
        () => EmbeddedBrokerStore.open(newer),
        (error: Error) => error.message.includes(newer) && /schema version 99/.test(error.message),
      );
      const junk = join(dir.path, 'junk.db');
      writeFileSync(junk, 'this is not a database, just some text long enough to have a header '.repeat(20));
      assert.throws(
        () => EmbeddedBrokerStore.open(junk),
        (error: Error) => error.message.includes(junk),
      );
    } finally {
      dir.remove();
    }
  });
});
