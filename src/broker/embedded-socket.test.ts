import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, lstatSync, readFileSync, writeFileSync } from 'node:fs';
import { createConnection, type Socket } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { tempDir } from '../../test/testing/temp-dir.js';
import { isBrokerError, type BrokerEvent } from './broker.js';
import { brokerConformance } from '../../test/broker/conformance.js';
import { EmbeddedBroker, type EmbeddedBrokerOptions } from './embedded.js';
import { SocketBroker } from './embedded-socket-client.js';
import { EmbeddedBrokerServer } from './embedded-socket-server.js';
import { eventually, Inbox, quietMs, sleep } from '../../test/broker/testkit.js';

const childScript = fileURLToPath(new URL('../../test/broker/embedded-socket-fixture-child.js', import.meta.url));
const fastRetry = { initialMs: 20, maxMs: 100 };

/**
 * An EmbeddedBroker served on a socket in a fresh temp dir. `close()` closes every client
 * it handed out too: one left open would keep reconnecting, and the test process alive.
 */
async function served(options: EmbeddedBrokerOptions = {}) {
  const dir = tempDir('planrun-sock-');
  const path = join(dir.path, 'broker.sock');
  const core = new EmbeddedBroker(options);
  const server = await EmbeddedBrokerServer.listen({ broker: core, path });
  const clients: SocketBroker[] = [];
  return {
    dir,
    path,
    core,
    server,
    async connect(): Promise<SocketBroker> {
      const client = await SocketBroker.connect({ path, retry: fastRetry });
      clients.push(client);
      return client;
    },
    async close() {
      await Promise.all(clients.map((client) => client.close()));
      await server.close();
      await core.close();
      dir.remove();
    },
  };
}

brokerConformance('embedded over a Unix socket', async () => {
  const setup = await served();
  return { connect: () => setup.connect(), close: () => setup.close() };
});

/** Spawns the fixture worker, which consumes `queue` without acking and prints each delivery. */
function startChild(path: string, queue: string): { child: ChildProcess; lines: () => string[]; exited: Promise<unknown> } {
  const child = spawn(process.execPath, [childScript, path, queue], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  return { child, lines: () => output.split('\n').filter(Boolean), exited };
}

/** Leaves a socket file at `path` with nothing listening: a server killed before it could remove it. */
async function leaveStaleSocket(path: string): Promise<void> {
  const script = `require('node:net').createServer().listen(${JSON.stringify(path)}, () => process.kill(process.pid, 'SIGKILL'))`;
  const child = spawn(process.execPath, ['-e', script], { stdio: 'ignore' });
  await new Promise((resolve) => child.once('exit', resolve));
  assert.ok(lstatSync(path).isSocket(), 'the dead server left its socket file');
}

describe('EmbeddedBroker over a Unix socket', () => {
  it('a worker process killed with SIGKILL loses its unacked delivery to another connection, redelivered', async () => {
    const setup = await served();
    const worker = startChild(setup.path, 'work');
    try {
      const publisher = await setup.connect();
      await publisher.declareQueue('work');
      await publisher.sendToQueue('work', Buffer.from('long job'), { messageId: 'job-1' });

      await eventually(
        () => `the child to take job-1 (output: ${worker.lines().join(' | ')})`,
        () => worker.lines().some((line) => line.includes('job-1')),
      );
      assert.deepEqual(JSON.parse(worker.lines().find((line) => line.includes('job-1'))!), {
        messageId: 'job-1',
        redelivered: false,
      });

      const other = await setup.connect();
      const inbox = new Inbox(true);
      await other.consume('work', inbox.handler, { prefetch: 1 });
      await sleep(quietMs);
      assert.equal(inbox.deliveries.length, 0, 'a message held by a live process is not handed to another');

      worker.child.kill('SIGKILL');
      await worker.exited;
      const [delivery] = await inbox.waitFor(1);
      assert.equal(delivery!.messageId, 'job-1');
      assert.equal(delivery!.redelivered, true);
      assert.equal(delivery!.body.toString(), 'long job');
      await eventually('the dead connection to be gone', () => setup.server.connectionCount === 2);
      await publisher.close();
      await other.close();
    } finally {
      worker.child.kill('SIGKILL');
      await setup.close();
    }
  });

  it('after a server restart the client reconnects, declares again, and its consumers get messages again', async () => {
    const first = await served();
    const client = await first.connect();
    const events: BrokerEvent[] = [];
    client.onEvent((event) => events.push(event));
    let second: { core: EmbeddedBroker; server: EmbeddedBrokerServer } | undefined;
    try {
      await client.declareTopicExchange('results');
      await client.declareQueue('work');
      await client.declareQueue('watch');
      await client.declareQueue('idle');
      await client.declareQueue('rpc');
      await client.bindQueue('watch', 'results', 't1.#');
      const work = new Inbox(true);
      const watch = new Inbox(true);
      const idle = new Inbox(true);
      await client.consume('work', work.handler, { prefetch: 1 });
      await client.consume('watch', watch.handler, { prefetch: 1 });
      const idleSubscription = await client.consume('idle', idle.handler, { prefetch: 1 });
      await idleSubscription.pause();
      await client.sendToQueue('work', Buffer.from('before'));
      await work.waitFor(1);

      const inFlight = client.request('rpc', Buffer.from('unanswered'), { timeoutMs: 10_000 });
      await sleep(20);
      await first.server.close();
      await first.core.close();
      await assert.rejects(inFlight, (error: unknown) => isBrokerError(error, 'disconnected'));
      await eventually('connection_lost', () => events.some((event) => event.type === 'connection_lost'));
      await assert.rejects(client.sendToQueue('work', Buffer.from('x')), (error: unknown) => isBrokerError(error, 'disconnected'));
      assert.equal(existsSync(first.path), false, 'the server removed its socket file');
      await sleep(150); // some reconnection attempts find nobody

      const core = new EmbeddedBroker();
      const server = await EmbeddedBrokerServer.listen({ broker: core, path: first.path });
      second = { core, server };
      await eventually('connection_restored', () => events.some((event) => event.type === 'connection_restored'));
      for (const queue of ['work', 'watch', 'idle', 'rpc']) assert.ok(core.hasQueue(queue), `${queue} declared again`);

      const publisher = core.connect();
      await publisher.sendToQueue('work', Buffer.from('after'));
      await publisher.publish('results', 't1.job.finished', Buffer.from('result'));
      await publisher.sendToQueue('idle', Buffer.from('waiting'));
      await work.waitFor(2);
      await watch.waitFor(1);
      assert.deepEqual(work.bodies, ['before', 'after']);
      assert.deepEqual(watch.bodies, ['result']);
      await sleep(quietMs);
      assert.equal(idle.deliveries.length, 0, 'a paused consumer stays paused across the reconnect');
      await idleSubscription.resume();
      await idle.waitFor(1);

      await client.sendToQueue('work', Buffer.from('from the client'));
      await work.waitFor(3);
      assert.deepEqual(
        events.map((event) => event.type),
        ['connection_lost', 'connection_restored'],
      );
    } finally {
      await first.close(); // closes the client too
      await second?.server.close();
      await second?.core.close();
    }
  });

  it('passes on consumer timeouts: the consumer is interrupted, its delivery requeued, and it resumes', async () => {
    const setup = await served({ consumerTimeoutMs: 100 });
    try {
      const client = await setup.connect();
      const events: BrokerEvent[] = [];
      client.onEvent((event) => events.push(event));
      await client.declareQueue('work');
      const inbox = new Inbox(false);
      await client.consume('work', inbox.handler, { prefetch: 1 });
      await client.sendToQueue('work', Buffer.from('x'), { messageId: 'job-1' });

      await inbox.waitFor(2, 2000);
      assert.deepEqual(
        inbox.deliveries.slice(0, 2).map((delivery) => [delivery.messageId, delivery.redelivered]),
        [
          ['job-1', false],
          ['job-1', true],
        ],
      );
      const interrupted = events.find((event) => event.type === 'consumer_interrupted');
      assert.ok(interrupted && interrupted.type === 'consumer_interrupted' && interrupted.queue === 'work');
      assert.match(interrupted.reason, /consumer timeout/);
      inbox.deliveries.at(-1)!.ack();
      await client.close();
    } finally {
      await setup.close();
    }
  });

  it('connecting where no server listens fails fast with disconnected', async () => {
    const dir = tempDir('planrun-sock-');
    try {
      const started = Date.now();
      await assert.rejects(SocketBroker.connect({ path: join(dir.path, 'broker.sock') }), (error: unknown) => isBrokerError(error, 'disconnected'));
      assert.ok(Date.now() - started < 1000);
    } finally {
      dir.remove();
    }
  });

  it('carries bodies of megabytes, and any bytes, intact, both ways', async () => {
    const setup = await served();
    try {
      const client = await setup.connect();
      const server = await setup.connect();
      await client.declareQueue('big');
      await client.declareQueue('rpc');
      const payload = randomBytes(5 * 1024 * 1024);
      const inbox = new Inbox(true);
      await client.consume('big', inbox.handler, { prefetch: 1 });
      await client.sendToQueue('big', payload, { messageId: 'big-1' });
      const [delivery] = await inbox.waitFor(1);
      assert.ok(delivery!.body.equals(payload));

      await server.serve('rpc', (request) => Buffer.concat([request.body, Buffer.from([0, 255])]));
      const reply = await client.request('rpc', payload, { timeoutMs: 5000 });
      assert.ok(reply.equals(Buffer.concat([payload, Buffer.from([0, 255])])));
      await client.close();
      await server.close();
    } finally {
      await setup.close();
    }
  });

  it('a peer that sends garbage is cut off, and its held deliveries requeued; other clients carry on', async () => {
    const setup = await served();
    let rogue: Socket | undefined;
    try {
      const client = await setup.connect();
      await client.declareQueue('work');
      await client.sendToQueue('work', Buffer.from('x'), { messageId: 'm1' });
      const socket = (rogue = createConnection(setup.path));
      const closed = new Promise((resolve) => socket.once('close', resolve));
      socket.on('error', () => undefined);
      socket.write(`${JSON.stringify({ t: 'call', id: 1, call: { op: 'consume', sub: 1, queue: 'work', prefetch: 1 } })}\n`);
      let received = '';
      socket.on('data', (chunk: Buffer) => (received += chunk.toString()));
      await eventually('the rogue to take the message', () => received.includes('"t":"delivery"'));
      socket.write('this is not json\n');
      await closed;

      const inbox = new Inbox(true);
      await client.consume('work', inbox.handler, { prefetch: 1 });
      const [delivery] = await inbox.waitFor(1);
      assert.equal(delivery!.messageId, 'm1');
      assert.equal(delivery!.redelivered, true);
    } finally {
      rogue?.destroy();
      await setup.close();
    }
  });

  it('if the broker is closed under its server, clients see the connection lost, not their own broker closed', async () => {
    const setup = await served();
    try {
      const client = await setup.connect();
      const events: BrokerEvent[] = [];
      client.onEvent((event) => events.push(event));
      await setup.core.close();
      await assert.rejects(client.declareQueue('q'), (error: unknown) => isBrokerError(error, 'disconnected'));
      await eventually('connection_lost', () => events.some((event) => event.type === 'connection_lost'));
      await client.close();
    } finally {
      await setup.close();
    }
  });

  describe('the socket file', () => {
    it('a stale socket file left by a dead server is removed, and the new server listens', async () => {
      const dir = tempDir('planrun-sock-');
      const path = join(dir.path, 'broker.sock');
      const core = new EmbeddedBroker();
      let server: EmbeddedBrokerServer | undefined;
      let client: SocketBroker | undefined;
      try {
        await leaveStaleSocket(path);
        server = await EmbeddedBrokerServer.listen({ broker: core, path });
        client = await SocketBroker.connect({ path });
        await client.declareQueue('q');
        assert.ok(core.hasQueue('q'));
        assert.equal(lstatSync(path).mode & 0o777, 0o600, 'only this user may connect');
      } finally {
        await client?.close();
        await server?.close();
        await core.close();
        dir.remove();
      }
    });

    it('a path a live server answers on is refused, and that server keeps working', async () => {
      const setup = await served();
      const rival = new EmbeddedBroker();
      try {
        await assert.rejects(EmbeddedBrokerServer.listen({ broker: rival, path: setup.path }), /already listening on/);
        const client = await setup.connect();
        await client.declareQueue('q');
        assert.ok(setup.core.hasQueue('q'));
        assert.ok(!rival.hasQueue('q'));
        await client.close();
      } finally {
        await rival.close();
        await setup.close();
      }
    });

    it('something other than a socket at the path is refused and left alone', async () => {
      const dir = tempDir('planrun-sock-');
      const path = join(dir.path, 'broker.sock');
      const core = new EmbeddedBroker();
      try {
        writeFileSync(path, 'not a socket');
        await assert.rejects(EmbeddedBrokerServer.listen({ broker: core, path }), /other than a socket/);
        assert.equal(readFileSync(path, 'utf8'), 'not a socket');
      } finally {
        await core.close();
        dir.remove();
      }
    });

    it('a path too long for a Unix socket is refused rather than truncated', async () => {
      const core = new EmbeddedBroker();
      try {
        const path = `/tmp/${'x'.repeat(120)}.sock`;
        await assert.rejects(EmbeddedBrokerServer.listen({ broker: core, path }), /more than the \d+ a Unix socket allows/);
        await assert.rejects(SocketBroker.connect({ path }), RangeError);
        assert.equal(existsSync(path), false);
      } finally {
        await core.close();
      }
    });
  });

  it('closing the server closes its clients’ connections, requeueing what they held, and leaves no timers', async () => {
    const timers = (): number => process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;
    const before = timers();
    const setup = await served();
    try {
      const client = await setup.connect();
      const events: BrokerEvent[] = [];
      client.onEvent((event) => events.push(event));
      await client.declareQueue('work');
      const inbox = new Inbox(false);
      await client.consume('work', inbox.handler, { prefetch: 1 });
      const local = setup.core.connect();
      await local.sendToQueue('work', Buffer.from('held'));
      await inbox.waitFor(1);

      await setup.server.close();
      const other = new Inbox(true);
      await local.consume('work', other.handler, { prefetch: 1 });
      const [delivery] = await other.waitFor(1);
      assert.equal(delivery!.redelivered, true);
      await eventually('connection_lost', () => events.some((event) => event.type === 'connection_lost'));
      await client.close(); // while it is trying to reconnect
    } finally {
      await setup.close();
    }
    assert.equal(timers(), before);
  });
});
