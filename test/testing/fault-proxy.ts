/**
 * A proxy that injects network faults between a client and a server, for tests: over
 * TCP (point the client at `127.0.0.1:proxy.port`) or over Unix sockets (the embedded
 * broker's transport: `FaultProxy.start({ path: server }, { path: proxyPath })`, point the
 * client at `proxy.path`), and switch modes while it runs.
 *
 * - pass (the start, and what `heal()` returns to): bytes flow as they come.
 * - `latency(ms)`: every chunk, each way, is held `ms` before it is passed on, in order.
 * - `blackhole()`: a cut cable. Sockets stay open and nothing gets through either way,
 *   nor do closes; new connections are accepted and get nothing either. Held bytes are
 *   not discarded: as TCP retransmission would, `heal()` delivers them in order, so a
 *   connection that outlives a short cut stays consistent (and one whose ends gave up
 *   during it sees their closes then).
 * - `reset()`: destroys every current connection with a TCP RST, both ends (a Unix socket,
 *   which has no RST, is closed at once); new ones work.
 */
import net from 'node:net';

export type ProxyMode = { kind: 'pass' } | { kind: 'latency'; ms: number } | { kind: 'blackhole' };

/** A TCP server (host defaults to 127.0.0.1), or a Unix socket. */
export type ProxyTarget = { host?: string; port: number } | { path: string };

export class FaultProxy {
  private currentMode: ProxyMode = { kind: 'pass' };
  private readonly connections = new Set<ProxiedConnection>();

  private constructor(
    private readonly server: net.Server,
    private readonly target: net.NetConnectOpts,
  ) {
    server.on('connection', (client) => this.accept(client));
  }

  /** Starts listening: on 127.0.0.1 at a free port, or on the Unix socket `listen.path`. */
  static async start(target: ProxyTarget, listen?: { path: string }): Promise<FaultProxy> {
    const server = net.createServer({ allowHalfOpen: true });
    const proxy = new FaultProxy(server, 'path' in target ? { path: target.path } : { host: target.host ?? '127.0.0.1', port: target.port });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      const listening = () => {
        server.off('error', reject);
        resolve();
      };
      if (listen) server.listen(listen.path, listening);
      else server.listen(0, '127.0.0.1', listening);
    });
    return proxy;
  }

  /** The TCP port it listens on (a proxy on a Unix socket has none: see `path`). */
  get port(): number {
    const address = this.server.address();
    if (typeof address === 'string' || address === null) throw new Error(`this proxy listens on the Unix socket ${address}, not on a port`);
    return address.port;
  }

  /** The Unix socket it listens on (a TCP proxy has none: see `port`). */
  get path(): string {
    const address = this.server.address();
    if (typeof address !== 'string') throw new Error('this proxy listens on a TCP port, not on a Unix socket');
    return address;
  }

  /** Connections currently proxied (both ends not yet closed). */
  get connectionCount(): number {
    return this.connections.size;
  }

  latency(ms: number): void {
    if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`latency must be a non-negative number of milliseconds (got ${ms})`);
    this.currentMode = { kind: 'latency', ms };
  }

  blackhole(): void {
    this.currentMode = { kind: 'blackhole' };
    for (const connection of this.connections) connection.hold();
  }

  /** Back to pass: forwards whatever a blackhole held, then everything as it comes. */
  heal(): void {
    this.currentMode = { kind: 'pass' };
    for (const connection of this.connections) connection.release();
  }

  reset(): void {
    for (const connection of [...this.connections]) connection.reset();
  }

  /** Stops listening and destroys every connection. */
  async close(): Promise<void> {
    for (const connection of [...this.connections]) connection.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: net.Socket): void {
    const upstream = net.connect({ ...this.target, allowHalfOpen: true });
    const connection = new ProxiedConnection(
      client,
      upstream,
      () => this.currentMode,
      () => this.connections.delete(connection),
    );
    this.connections.add(connection);
    if (this.currentMode.kind === 'blackhole') connection.hold();
  }
}

/** Both directions of one proxied connection. */
class ProxiedConnection {
  private readonly pipes: [Pipe, Pipe];
  private openSockets = 2;

  constructor(
    private readonly client: net.Socket,
    private readonly upstream: net.Socket,
    mode: () => ProxyMode,
    onClosed: () => void,
  ) {
    this.pipes = [new Pipe(client, upstream, mode), new Pipe(upstream, client, mode)];
    for (const socket of [client, upstream]) {
      socket.on('error', () => {}); // an error is followed by 'close', which is what we act on
      socket.on('close', () => {
        if (--this.openSockets === 0) {
          for (const pipe of this.pipes) pipe.stop();
          onClosed();
        }
      });
    }
  }

  hold(): void {
    for (const pipe of this.pipes) pipe.hold();
  }

  release(): void {
    for (const pipe of this.pipes) pipe.release();
  }

  reset(): void {
    for (const pipe of this.pipes) pipe.stop();
    for (const socket of [this.client, this.upstream]) {
      if (socket.destroyed) continue;
      // A Unix socket has no RST: resetAndDestroy() throws for it.
      if (socket.remotePort === undefined && socket.localPort === undefined) socket.destroy();
      else socket.resetAndDestroy();
    }
  }

  destroy(): void {
    for (const pipe of this.pipes) pipe.stop();
    this.client.destroy();
    this.upstream.destroy();
  }
}

type Item = { kind: 'data'; chunk: Buffer } | { kind: 'end' } | { kind: 'destroy' };

/**
 * One direction: what `from` sends, passed on to `to` in order, each item when its
 * release time comes (now, after a latency, or, while black-holed, at the heal).
 */
class Pipe {
  private readonly items: Array<{ item: Item; releaseAt: number }> = [];
  private timer: NodeJS.Timeout | undefined;
  private ended = false;
  private stopped = false;

  constructor(
    private readonly from: net.Socket,
    private readonly to: net.Socket,
    private readonly mode: () => ProxyMode,
  ) {
    from.on('data', (chunk: Buffer) => this.push({ kind: 'data', chunk }));
    from.on('end', () => {
      this.ended = true;
      this.push({ kind: 'end' });
    });
    // Closed without an orderly end (reset or error): the other side is cut off too.
    from.on('close', () => {
      if (!this.ended) this.push({ kind: 'destroy' });
    });
  }

  /** Stops reading, so a sender facing a cut cable fills its buffers and waits, as over TCP. */
  hold(): void {
    this.from.pause();
  }

  release(): void {
    const now = Date.now();
    for (const entry of this.items) if (entry.releaseAt === Infinity) entry.releaseAt = now;
    this.from.resume();
    this.flush();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.items.length = 0;
  }

  private push(item: Item): void {
    if (this.stopped) return;
    const mode = this.mode();
    const delay = mode.kind === 'blackhole' ? Infinity : mode.kind === 'latency' ? mode.ms : 0;
    this.items.push({ item, releaseAt: Date.now() + delay });
    this.flush();
  }

  private flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const now = Date.now();
    while (this.items.length > 0 && this.items[0]!.releaseAt <= now) this.forward(this.items.shift()!.item);
    const next = this.items[0];
    if (next && next.releaseAt !== Infinity) this.timer = setTimeout(() => this.flush(), next.releaseAt - now);
  }

  private forward(item: Item): void {
    if (this.to.destroyed) return;
    if (item.kind === 'data') this.to.write(item.chunk);
    else if (item.kind === 'end') this.to.end();
    else this.to.destroy();
  }
}
