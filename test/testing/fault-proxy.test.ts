import assert from 'node:assert/strict';
import net from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { FaultProxy } from './fault-proxy.js';
import { tempDir } from './temp-dir.js';

/** A client socket that records what it receives and how it ended. */
class Client {
  received = '';
  closed = false;
  error: NodeJS.ErrnoException | undefined;

  private constructor(readonly socket: net.Socket) {
    socket.setEncoding('utf8');
    socket.on('data', (text: string) => (this.received += text));
    socket.on('error', (error) => (this.error = error));
    socket.on('close', () => (this.closed = true));
  }

  /** A port on 127.0.0.1, or a Unix socket's path. */
  static connect(to: number | string): Promise<Client> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(typeof to === 'number' ? { host: '127.0.0.1', port: to } : { path: to }, () => {
        socket.off('error', reject);
        resolve(new Client(socket));
      });
      socket.once('error', reject);
    });
  }

  async waitFor(what: string, condition: () => boolean, timeoutMs = 2000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!condition()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what} (received ${JSON.stringify(this.received)})`);
      await sleep(5);
    }
  }

  waitForText(text: string): Promise<void> {
    return this.waitFor(JSON.stringify(text), () => this.received === text);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

describe('FaultProxy', () => {
  let echo: net.Server;
  let echoPort: number;
  const serverSockets = new Set<net.Socket>();

  before(async () => {
    echo = net.createServer((socket) => {
      serverSockets.add(socket);
      socket.on('close', () => serverSockets.delete(socket));
      socket.on('error', () => {});
      socket.pipe(socket);
    });
    await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
    echoPort = (echo.address() as net.AddressInfo).port;
  });

  after(async () => {
    for (const socket of serverSockets) socket.destroy();
    await new Promise<void>((resolve) => echo.close(() => resolve()));
  });

  async function withProxy(run: (proxy: FaultProxy) => Promise<void>): Promise<void> {
    const proxy = await FaultProxy.start({ port: echoPort });
    try {
      await run(proxy);
    } finally {
      await proxy.close();
    }
  }

  it('passes bytes both ways', () =>
    withProxy(async (proxy) => {
      assert.ok(proxy.port > 0 && proxy.port !== echoPort);
      const client = await Client.connect(proxy.port);
      client.socket.write('hello');
      await client.waitForText('hello');
      assert.equal(proxy.connectionCount, 1);
    }));

  it('adds latency each way, keeping the order across a change of mode', () =>
    withProxy(async (proxy) => {
      const client = await Client.connect(proxy.port);
      proxy.latency(100);
      const started = Date.now();
      client.socket.write('a');
      await client.waitForText('a');
      const roundTrip = Date.now() - started;
      assert.ok(roundTrip >= 190, `a round trip took ${roundTrip} ms, expected two latencies`);

      client.socket.write('b');
      await sleep(20);
      proxy.heal();
      client.socket.write('c'); // sent without latency, but must not overtake 'b'
      await client.waitForText('abc');
    }));

  it('blackhole passes nothing and keeps sockets open; heal delivers what was held', () =>
    withProxy(async (proxy) => {
      const client = await Client.connect(proxy.port);
      proxy.blackhole();
      client.socket.write('held');
      const latecomer = await Client.connect(proxy.port); // accepted, but cut off too
      latecomer.socket.write('late');
      await sleep(200);
      assert.equal(client.received, '');
      assert.equal(latecomer.received, '');
      assert.equal(client.closed, false);

      proxy.heal();
      await client.waitForText('held');
      await latecomer.waitForText('late');
      client.socket.write('+more');
      await client.waitForText('held+more');
    }));

  it('reset destroys current connections with a reset; new connections work', () =>
    withProxy(async (proxy) => {
      const client = await Client.connect(proxy.port);
      client.socket.write('x');
      await client.waitForText('x');
      proxy.reset();
      await client.waitFor('the close', () => client.closed);
      assert.equal(client.error?.code, 'ECONNRESET');
      await client.waitFor('the proxy to forget it', () => proxy.connectionCount === 0);

      const next = await Client.connect(proxy.port);
      next.socket.write('y');
      await next.waitForText('y');
    }));

  it('passes an orderly close through', () =>
    withProxy(async (proxy) => {
      const client = await Client.connect(proxy.port);
      client.socket.end('bye');
      await client.waitFor('the close', () => client.closed);
      assert.equal(client.received, 'bye');
      assert.equal(client.error, undefined);
    }));

  it('close tears down connections and stops listening', async () => {
    const proxy = await FaultProxy.start({ port: echoPort });
    const client = await Client.connect(proxy.port);
    const port = proxy.port;
    await proxy.close();
    await client.waitFor('the close', () => client.closed);
    await assert.rejects(Client.connect(port), { code: 'ECONNREFUSED' });
  });
});

describe('FaultProxy on Unix sockets', () => {
  const dir = tempDir('planrun-proxy-');
  const serverPath = join(dir.path, 'server.sock');
  let echo: net.Server;

  before(async () => {
    echo = net.createServer((socket) => {
      socket.on('error', () => {});
      socket.pipe(socket);
    });
    await new Promise<void>((resolve) => echo.listen(serverPath, resolve));
  });

  after(async () => {
    await new Promise<void>((resolve) => echo.close(() => resolve()));
    dir.remove();
  });

  it('passes, holds and heals, and closes on reset, as over TCP', async () => {
    const proxy = await FaultProxy.start({ path: serverPath }, { path: join(dir.path, 'proxy.sock') });
    try {
      assert.equal(proxy.path, join(dir.path, 'proxy.sock'));
      assert.throws(() => proxy.port, /Unix socket/);
      const client = await Client.connect(proxy.path);
      client.socket.write('one');
      await client.waitForText('one');

      proxy.blackhole();
      client.socket.write('+held');
      await sleep(150);
      assert.equal(client.received, 'one');
      assert.equal(client.closed, false);
      proxy.heal();
      await client.waitForText('one+held');

      proxy.reset();
      await client.waitFor('the close', () => client.closed);
      await client.waitFor('the proxy to forget it', () => proxy.connectionCount === 0);
      const next = await Client.connect(proxy.path);
      next.socket.write('two');
      await next.waitForText('two');
    } finally {
      await proxy.close();
    }
  });
});
