/**
 * The wire protocol between `SocketBroker` (a client process) and `EmbeddedBrokerServer`
 * (the process that owns the EmbeddedBroker), over a local socket: one JSON object per
 * line, bodies as base64. The server greets each connection with `hello`; the client
 * then sends calls (each answered `done` or `failed`, matched by id, in any order) and
 * settlements (not answered); the server pushes deliveries and consumer events.
 */
import type { Socket } from 'node:net';
import { BrokerError, isBrokerError, type BrokerErrorCode, type HeaderValue } from './broker.js';
import type { DeliveredMessage } from './delivery.js';

export const protocolVersion = 1;

/** Publish options as they travel (a JSON object drops the undefined ones). */
export interface WirePublishOptions {
  messageId?: string;
  correlationId?: string;
  headers?: Record<string, HeaderValue>;
  expirationMs?: number;
}

/** What a client asks the server to do; `sub` is the client's id for one subscription. */
export type Operation =
  | { op: 'declareQueue'; name: string }
  | { op: 'declareTopicExchange'; name: string }
  | { op: 'bindQueue'; queue: string; exchange: string; pattern: string }
  | { op: 'deleteQueue'; name: string }
  | { op: 'deleteExchange'; name: string }
  | { op: 'sendToQueue'; queue: string; body: string; options: WirePublishOptions }
  | { op: 'publish'; exchange: string; routingKey: string; body: string; options: WirePublishOptions }
  | { op: 'consume'; sub: number; queue: string; prefetch: number }
  | { op: 'pause'; sub: number }
  | { op: 'resume'; sub: number }
  | { op: 'cancel'; sub: number }
  | { op: 'request'; queue: string; body: string; timeoutMs: number; waitMs?: number; headers?: Record<string, HeaderValue>; exchange?: string };

export type ClientFrame =
  | { t: 'call'; id: number; call: Operation }
  /** Acks or nacks the delivery the server sent under `tag`; a tag it no longer holds is ignored. */
  | { t: 'settle'; tag: number; ack: boolean; requeue: boolean };

export interface WireMessage {
  body: string;
  messageId?: string;
  correlationId?: string;
  replyTo?: string;
  headers: Record<string, unknown>;
  routingKey: string;
  redelivered: boolean;
}

export interface WireError {
  name: string;
  message: string;
  code?: string;
}

export type ServerFrame =
  | { t: 'hello'; protocol: number }
  /** The call succeeded; `body` is the reply to a `request`. */
  | { t: 'done'; id: number; body?: string }
  | { t: 'failed'; id: number; error: WireError }
  | { t: 'delivery'; sub: number; tag: number; message: WireMessage }
  | { t: 'interrupted'; queue: string; reason: string };

/** Longest frame either side accepts: a peer that sends more without a newline is cut off. */
export const maxFrameChars = 64 * 1024 * 1024;

/**
 * Longest socket path the kernel takes (`sun_path` less its NUL). Node silently truncates
 * a longer one, so the server would listen somewhere else than asked.
 */
const maxSocketPathBytes = process.platform === 'linux' ? 107 : 103;

export function requireSocketPath(path: string): string {
  if (path.length === 0) throw new RangeError('the broker socket path is empty');
  const bytes = Buffer.byteLength(path);
  if (bytes > maxSocketPathBytes) {
    throw new RangeError(
      `the broker socket path is ${bytes} bytes long, more than the ${maxSocketPathBytes} a Unix socket allows: ${path} (use a shorter data dir)`,
    );
  }
  return path;
}

/**
 * Writes one frame; a frame for a socket that is already gone is dropped (its close is
 * handled elsewhere). The frames of one turn of the event loop leave together, in one
 * system call: a settle sends a delivery, its ack, a request and a reply at once, and a
 * write each was a tenth of the orchestrator's time (docs/performance.md).
 */
export function sendFrame(socket: Socket, frame: ClientFrame | ServerFrame): void {
  if (socket.destroyed || !socket.writable) return;
  if (socket.writableCorked === 0) {
    socket.cork();
    process.nextTick(() => socket.uncork());
  }
  socket.write(`${JSON.stringify(frame)}\n`);
}

/**
 * Reads the socket as frames. A line that is not a JSON object, or a frame longer than
 * `maxFrameChars`, is a protocol error: the socket is destroyed with it, and its
 * 'close' follows as for any other loss.
 */
export function readFrames(socket: Socket, onFrame: (frame: unknown) => void): void {
  socket.setEncoding('utf8');
  let partial = '';
  socket.on('data', (chunk: string) => {
    try {
      if (!chunk.includes('\n')) {
        // Most of a big frame: kept whole, so a frame is split into lines only once.
        partial += chunk;
        if (partial.length > maxFrameChars) throw new Error(`a frame longer than ${maxFrameChars} characters`);
        return;
      }
      const lines = (partial + chunk).split('\n');
      partial = lines.pop()!;
      for (const line of lines) {
        if (socket.destroyed) return;
        if (line.length === 0) continue;
        const frame: unknown = JSON.parse(line);
        if (typeof frame !== 'object' || frame === null || typeof (frame as { t?: unknown }).t !== 'string') {
          throw new Error(`not a frame: ${line.slice(0, 80)}`);
        }
        onFrame(frame);
      }
      if (partial.length > maxFrameChars) throw new Error(`a frame longer than ${maxFrameChars} characters`);
    } catch (error) {
      socket.destroy(new Error(`broker socket protocol error: ${error instanceof Error ? error.message : String(error)}`));
    }
  });
}

export function encodeBody(body: Buffer): string {
  return body.toString('base64');
}

export function decodeBody(body: string | undefined): Buffer {
  return Buffer.from(body ?? '', 'base64');
}

export function messageToWire(message: DeliveredMessage): WireMessage {
  return {
    body: encodeBody(message.body),
    messageId: message.messageId,
    correlationId: message.correlationId,
    replyTo: message.replyTo,
    headers: { ...message.headers },
    routingKey: message.routingKey,
    redelivered: message.redelivered,
  };
}

export function messageFromWire(message: WireMessage): DeliveredMessage {
  return {
    body: decodeBody(message.body),
    messageId: message.messageId,
    correlationId: message.correlationId,
    replyTo: message.replyTo,
    headers: Object.freeze({ ...message.headers }),
    routingKey: message.routingKey,
    redelivered: message.redelivered === true,
  };
}

export function errorToWire(error: unknown): WireError {
  if (isBrokerError(error)) return { name: error.name, message: error.message, code: error.code };
  if (error instanceof Error) return { name: error.name, message: error.message };
  return { name: 'Error', message: String(error) };
}

/** Rebuilds an error the server sent: a BrokerError keeps its code, a RangeError (a bad argument) stays one. */
export function errorFromWire(error: WireError): Error {
  if (error.name === 'BrokerError' && typeof error.code === 'string') {
    return new BrokerError(error.code as BrokerErrorCode, error.message);
  }
  if (error.name === 'RangeError') return new RangeError(error.message);
  const rebuilt = new Error(error.message);
  rebuilt.name = error.name;
  return rebuilt;
}
