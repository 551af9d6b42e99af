/**
 * One socket from a SocketBroker to the EmbeddedBrokerServer: calls matched to their
 * answers, settlements sent, deliveries and consumer events handed on. A link is never
 * reused: when its socket goes, everything in flight on it rejects, and the broker opens
 * a new link.
 */
import { createConnection, type Socket } from 'node:net';
import { BrokerError } from './broker.js';
import type { Settlement } from './delivery.js';
import { errorFromWire, protocolVersion, readFrames, sendFrame, type Operation, type ServerFrame } from './embedded-socket-protocol.js';

/** What a link hands on from the server. */
export interface LinkReceiver {
  delivery(link: Link, frame: Extract<ServerFrame, { t: 'delivery' }>): void;
  interrupted(frame: Extract<ServerFrame, { t: 'interrupted' }>): void;
  /** The socket went (not by `close()`). */
  lost(link: Link, error: Error): void;
}

interface PendingCall {
  resolve(body: string | undefined): void;
  reject(error: Error): void;
  guard: NodeJS.Timeout | undefined;
}

export class Link {
  private readonly pending = new Map<number, PendingCall>();
  private nextId = 1;
  /** Why calls fail now; set once the socket is gone or being closed. */
  private down: BrokerError | undefined;
  private readonly socketClosed: Promise<void>;

  private constructor(
    private readonly socket: Socket,
    private readonly receiver: LinkReceiver,
  ) {
    this.socketClosed = new Promise((resolve) => socket.once('close', () => resolve()));
  }

  /** Connects and waits for the server's greeting; rejects `disconnected` if no server answers in time. */
  static open(path: string, timeoutMs: number, receiver: LinkReceiver): Promise<Link> {
    return new Promise((resolve, reject) => {
      const socket = createConnection(path);
      const link = new Link(socket, receiver);
      let greeted = false;
      let lastError: Error | undefined;
      const timer = setTimeout(() => socket.destroy(new Error(`no greeting within ${timeoutMs} ms`)), timeoutMs);
      socket.on('error', (error) => (lastError = error));
      socket.once('close', () => {
        clearTimeout(timer);
        const error = new BrokerError(
          'disconnected',
          `${greeted ? 'lost the connection to' : 'cannot connect to'} the embedded broker at ${path}: ${lastError?.message ?? 'the server closed the connection'}`,
          { cause: lastError },
        );
        if (greeted) link.lose(error);
        else reject(error);
      });
      readFrames(socket, (frame) => {
        const received = frame as ServerFrame;
        if (greeted) return link.receive(received);
        if (received.t !== 'hello' || received.protocol !== protocolVersion) {
          socket.destroy(new Error(`expected protocol ${protocolVersion}, got ${JSON.stringify(received).slice(0, 80)}`));
          return;
        }
        greeted = true;
        clearTimeout(timer);
        resolve(link);
      });
    });
  }

  get alive(): boolean {
    return this.down === undefined;
  }

  /**
   * Runs an operation on the server; resolves with the reply body for requests. With
   * `guardMs`, rejects `timeout` if the server has not answered by then.
   */
  call(call: Operation, guardMs?: number): Promise<string | undefined> {
    if (this.down) return Promise.reject(this.down);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const guard =
        guardMs === undefined
          ? undefined
          : setTimeout(() => {
              this.pending.delete(id);
              reject(new BrokerError('timeout', `the embedded broker did not answer within ${guardMs} ms`));
            }, guardMs);
      this.pending.set(id, { resolve, reject, guard });
      sendFrame(this.socket, { t: 'call', id, call });
    });
  }

  /** Settles a delivery this link carried; on a link that is gone the server has requeued it already. */
  settle(tag: number, settlement: Settlement): void {
    if (this.down) return;
    sendFrame(this.socket, {
      t: 'settle',
      tag,
      ack: settlement.kind === 'ack',
      requeue: settlement.kind === 'nack' && settlement.requeue,
    });
  }

  /**
   * Rejects what is in flight with `closed` and ends the socket; resolves once the server
   * has closed its side, that is once it has closed the connection and requeued its messages.
   */
  async close(): Promise<void> {
    if (this.alive) {
      this.failAll((this.down = new BrokerError('closed', 'the broker was closed')));
      this.socket.end();
      const stuck = setTimeout(() => this.socket.destroy(), 2000);
      await this.socketClosed;
      clearTimeout(stuck);
    }
    await this.socketClosed;
  }

  /** Drops the socket at once, as if it were lost (for a link that failed while being set up). */
  destroy(): void {
    this.socket.destroy();
  }

  private receive(frame: ServerFrame): void {
    switch (frame.t) {
      case 'done':
      case 'failed': {
        const call = this.pending.get(frame.id);
        if (!call) return; // its guard fired already
        this.pending.delete(frame.id);
        clearTimeout(call.guard);
        if (frame.t === 'done') call.resolve(frame.body);
        else call.reject(errorFromWire(frame.error));
        return;
      }
      case 'delivery':
        return this.receiver.delivery(this, frame);
      case 'interrupted':
        return this.receiver.interrupted(frame);
      default:
        this.socket.destroy(new Error(`unexpected frame ${String((frame as { t: unknown }).t)}`));
    }
  }

  private lose(error: BrokerError): void {
    if (this.down) return; // closed deliberately: already failed with `closed`
    this.down = error;
    this.failAll(error);
    this.receiver.lost(this, error);
  }

  private failAll(error: BrokerError): void {
    for (const call of this.pending.values()) {
      clearTimeout(call.guard);
      call.reject(error);
    }
    this.pending.clear();
  }
}
