import type { FastifyReply } from 'fastify';

/**
 * One server-sent-events response. It takes the raw response over from fastify (the
 * stream outlives the handler's usual reply), writes events, and keeps proxies from
 * closing a quiet stream with a comment line every heartbeat.
 */
export class EventStream {
  private readonly heartbeat: NodeJS.Timeout;
  private readonly closeListeners: Array<() => void> = [];
  private readonly heartbeatListeners: Array<() => void> = [];
  private isClosed = false;

  constructor(
    private readonly reply: FastifyReply,
    heartbeatMs: number,
  ) {
    reply.hijack();
    reply.raw.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      // nginx buffers responses unless told not to; an event stream must flow as written.
      'x-accel-buffering': 'no',
    });
    reply.raw.flushHeaders();
    this.heartbeat = setInterval(() => {
      this.write(':\n\n');
      for (const listener of this.heartbeatListeners) listener();
    }, heartbeatMs);
    // 'close' comes both when the client goes away and after `end`: one place to clean up.
    reply.raw.once('close', () => {
      this.isClosed = true;
      clearInterval(this.heartbeat);
      for (const listener of this.closeListeners) listener();
    });
  }

  get closed(): boolean {
    return this.isClosed;
  }

  /** Called once the stream is closed, by either side. */
  onClose(listener: () => void): void {
    if (this.isClosed) listener();
    else this.closeListeners.push(listener);
  }

  /** Adds a listener to each heartbeat tick (after its comment line is written). */
  onHeartbeat(listener: () => void): void {
    this.heartbeatListeners.push(listener);
  }

  send(event: string, data: unknown): void {
    // JSON.stringify never emits a raw newline, so the data is one `data:` line.
    this.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  }

  end(): void {
    if (!this.reply.raw.writableEnded) this.reply.raw.end();
  }

  private write(chunk: string): void {
    if (this.isClosed || this.reply.raw.writableEnded) return;
    this.reply.raw.write(chunk);
  }
}

/** The streams open right now, so a server shutting down can end them instead of waiting on them. */
export class OpenEventStreams {
  private readonly open = new Set<EventStream>();

  constructor(private readonly heartbeatMs: number) {}

  start(reply: FastifyReply): EventStream {
    const stream = new EventStream(reply, this.heartbeatMs);
    this.open.add(stream);
    stream.onClose(() => this.open.delete(stream));
    return stream;
  }

  endAll(): void {
    for (const stream of this.open) stream.end();
  }
}
