/**
 * Serves an EmbeddedBroker to other processes over a Unix domain socket (see
 * `embedded-socket-protocol.ts`). Each accepted socket is one `broker.connect()`
 * connection, and it closes with the socket: when a worker process dies, even by
 * SIGKILL, the kernel closes its socket, and the messages it held go back to their
 * queues with `redelivered` set, as RabbitMQ does when a consumer's connection drops.
 */
import { chmod, lstat, unlink } from 'node:fs/promises';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { BrokerError, isBrokerError, type Broker, type Delivery, type Subscription } from './broker.js';
import type { EmbeddedBroker } from './embedded.js';
import {
  decodeBody,
  errorToWire,
  messageToWire,
  protocolVersion,
  readFrames,
  requireSocketPath,
  sendFrame,
  type ClientFrame,
  type Operation,
  type ServerFrame,
} from './embedded-socket-protocol.js';

export interface EmbeddedBrokerServerOptions {
  /** The broker to serve; it stays its owner's to close, after the server. */
  broker: EmbeddedBroker;
  /** Where to listen, e.g. `<data-dir>/broker.sock`. */
  path: string;
}

export class EmbeddedBrokerServer {
  private readonly sessions = new Set<Session>();
  private closing: Promise<void> | undefined;

  private constructor(
    readonly path: string,
    private readonly broker: EmbeddedBroker,
    private readonly server: Server,
  ) {
    server.on('connection', (socket) => this.accept(socket));
  }

  /**
   * Listens on `path`, readable and writable by this user only. A socket file left by a
   * server that died is removed first; one that a live server answers on is not, and
   * the call fails saying so. Neither is anything at `path` that is not a socket.
   */
  static async listen(options: EmbeddedBrokerServerOptions): Promise<EmbeddedBrokerServer> {
    const path = requireSocketPath(options.path);
    // allowHalfOpen: a client that ends its side sees the socket close only once its
    // connection is closed, so the client's close() resolves after its messages are requeued.
    const server = createServer({ allowHalfOpen: true });
    for (let attempt = 1; ; attempt++) {
      try {
        await listenOn(server, path);
        break;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE' || attempt === 3) throw error;
        await removeIfStale(path);
      }
    }
    const instance = new EmbeddedBrokerServer(path, options.broker, server);
    try {
      await chmod(path, 0o600);
    } catch (error) {
      await instance.close();
      throw error;
    }
    return instance;
  }

  /** Open client connections right now. */
  get connectionCount(): number {
    return this.sessions.size;
  }

  /**
   * Stops listening (the socket file goes), and closes every client connection, which
   * requeues what its consumers held. The broker itself stays open. Idempotent.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      const stopped = new Promise<void>((resolve) => this.server.close(() => resolve()));
      await Promise.all([...this.sessions].map((session) => session.close()));
      await stopped;
    })();
    return this.closing;
  }

  private accept(socket: Socket): void {
    if (this.closing) {
      socket.destroy();
      return;
    }
    let connection: Broker;
    try {
      connection = this.broker.connect();
    } catch {
      socket.destroy(); // the broker was closed under the server
      return;
    }
    const session = new Session(socket, connection, () => this.sessions.delete(session));
    this.sessions.add(session);
  }
}

/** One client: its socket and the broker connection that lives as long as it does. */
class Session {
  private readonly subscriptions = new Map<number, Subscription>();
  /** Deliveries sent to the client and not yet settled, by tag; tags are never reused. */
  private readonly held = new Map<number, { sub: number; delivery: Delivery }>();
  private nextTag = 1;
  private closing: Promise<void> | undefined;

  constructor(
    private readonly socket: Socket,
    private readonly connection: Broker,
    private readonly onClosed: () => void,
  ) {
    connection.onEvent((event) => {
      // Connection events are the client's own to raise, and handler failures happen on
      // its side; what the broker does to a consumer (timeout, deleted queue) is passed on.
      if (event.type === 'consumer_interrupted') this.send({ t: 'interrupted', queue: event.queue, reason: event.reason });
    });
    socket.on('error', () => undefined); // 'close' follows
    socket.on('end', () => void this.close());
    socket.on('close', () => void this.close());
    readFrames(socket, (frame) => this.receive(frame as ClientFrame));
    this.send({ t: 'hello', protocol: protocolVersion });
  }

  /** Closes the broker connection (requeueing what it held), then the socket. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      try {
        await this.connection.close();
      } finally {
        this.held.clear();
        this.subscriptions.clear();
        // Destroyed rather than ended: a client that stopped reading must not keep it open.
        this.socket.destroy();
        this.onClosed();
      }
    })();
    return this.closing;
  }

  private receive(frame: ClientFrame): void {
    if (this.closing) return;
    switch (frame.t) {
      case 'call':
        // Started now, in arrival order, so calls the client did not await still run in order.
        void this.run(frame.call).then(
          (body) => this.send(body === undefined ? { t: 'done', id: frame.id } : { t: 'done', id: frame.id, body }),
          (error: unknown) => {
            // The client never calls after its own close, so `closed` means the broker was
            // closed under the server: dropping the socket makes the call (and everything
            // else in flight) reject `disconnected` on the client, which reconnects.
            if (isBrokerError(error, 'closed')) void this.close();
            else this.send({ t: 'failed', id: frame.id, error: errorToWire(error) });
          },
        );
        return;
      case 'settle': {
        const held = this.held.get(frame.tag);
        if (!held) return; // settled already, or taken back when its consumer was cancelled
        this.held.delete(frame.tag);
        if (frame.ack) held.delivery.ack();
        else held.delivery.nack({ requeue: frame.requeue });
        return;
      }
      default:
        this.socket.destroy(new Error(`unknown frame type ${String((frame as { t: unknown }).t)}`));
    }
  }

  /** Runs one call on the connection; resolves with a body for requests. */
  private async run(call: Operation): Promise<string | undefined> {
    const connection = this.connection;
    switch (call.op) {
      case 'declareQueue':
        return void (await connection.declareQueue(call.name));
      case 'declareTopicExchange':
        return void (await connection.declareTopicExchange(call.name));
      case 'bindQueue':
        return void (await connection.bindQueue(call.queue, call.exchange, call.pattern));
      case 'deleteQueue':
        return void (await connection.deleteQueue(call.name));
      case 'deleteExchange':
        return void (await connection.deleteExchange(call.name));
      case 'sendToQueue':
        return void (await connection.sendToQueue(call.queue, decodeBody(call.body), call.options));
      case 'publish':
        return void (await connection.publish(call.exchange, call.routingKey, decodeBody(call.body), call.options));
      case 'consume':
        return void (await this.consume(call.sub, call.queue, call.prefetch));
      case 'pause':
        return void (await this.subscription(call.sub).pause());
      case 'resume':
        return void (await this.subscription(call.sub).resume());
      case 'cancel':
        return void (await this.cancel(call.sub));
      case 'request': {
        const reply = await connection.request(call.queue, decodeBody(call.body), {
          timeoutMs: call.timeoutMs,
          ...(call.waitMs === undefined ? {} : { waitMs: call.waitMs }),
          ...(call.exchange === undefined ? {} : { exchange: call.exchange }),
          headers: call.headers,
        });
        return reply.toString('base64');
      }
      default:
        throw new BrokerError('refused', `unknown operation ${String((call as { op: unknown }).op)}`);
    }
  }

  private async consume(sub: number, queue: string, prefetch: number): Promise<void> {
    if (this.subscriptions.has(sub)) throw new BrokerError('refused', `subscription ${sub} exists already`);
    const subscription = await this.connection.consume(
      queue,
      (delivery) => {
        // Held here until the client settles it; if the socket goes first, closing the
        // connection requeues it.
        const tag = this.nextTag++;
        this.held.set(tag, { sub, delivery });
        this.send({ t: 'delivery', sub, tag, message: messageToWire(delivery) });
      },
      { prefetch },
    );
    if (this.closing) await subscription.cancel();
    else this.subscriptions.set(sub, subscription);
  }

  private async cancel(sub: number): Promise<void> {
    const subscription = this.subscriptions.get(sub);
    if (!subscription) return;
    this.subscriptions.delete(sub);
    await subscription.cancel(); // requeues what it held: the client's late settlements find nothing
    for (const [tag, held] of this.held) if (held.sub === sub) this.held.delete(tag);
  }

  private subscription(sub: number): Subscription {
    const subscription = this.subscriptions.get(sub);
    if (!subscription) throw new BrokerError('not_found', `no subscription ${sub} on this connection`);
    return subscription;
  }

  private send(frame: ServerFrame): void {
    sendFrame(this.socket, frame);
  }
}

function listenOn(server: Server, path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const failed = (error: Error): void => reject(error);
    server.once('error', failed);
    server.listen(path, () => {
      server.off('error', failed);
      resolve();
    });
  });
}

/**
 * Removes the socket file at `path` if nothing answers on it (its server died without
 * removing it). Throws if a server answers, or if `path` is not a socket.
 */
async function removeIfStale(path: string): Promise<void> {
  let isSocket: boolean;
  try {
    isSocket = (await lstat(path)).isSocket();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return; // gone meanwhile: try again
    throw error;
  }
  if (!isSocket) throw new Error(`cannot listen for broker connections on ${path}: something other than a socket is there`);
  const answer = await probe(path);
  if (answer === 'live') {
    throw new Error(`another broker server is already listening on ${path} (is another orchestrator running with this data dir?)`);
  }
  if (answer === 'stale')
    await unlink(path).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'ENOENT') throw error;
    });
}

/** Whether a server answers on the socket at `path`. */
function probe(path: string): Promise<'live' | 'stale' | 'gone'> {
  return new Promise((resolve, reject) => {
    const socket = createConnection(path);
    socket.once('connect', () => {
      socket.destroy();
      resolve('live');
    });
    socket.once('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'ECONNREFUSED') resolve('stale');
      else if (error.code === 'ENOENT') resolve('gone');
      else reject(error);
    });
  });
}
