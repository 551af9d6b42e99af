/**
 * A server-sent events parser over a byte stream (fetch's `response.body`), following
 * the WHATWG event-stream rules: UTF-8, lines ended by CRLF, LF or CR (a CR at the end of
 * one chunk and the LF starting the next are one line end), `:` comments, one optional
 * space after the colon, `data` lines joined with LF, an event dispatched at a blank
 * line, and an unfinished event at the end of the stream dropped.
 */
export interface ServerSentEvent {
  /** The `event` field, `message` when absent. */
  event: string;
  data: string;
  /** The last `id` seen on the stream so far (ids carry over to later events). */
  id: string | undefined;
  /** A `retry` the server asked for, in milliseconds. */
  retry: number | undefined;
}

export async function* parseEventStream(chunks: AsyncIterable<Uint8Array>): AsyncGenerator<ServerSentEvent> {
  const decoder = new TextDecoder('utf-8');
  const parser = new EventStreamParser();
  for await (const chunk of chunks) yield* parser.push(decoder.decode(chunk, { stream: true }));
  yield* parser.push(decoder.decode());
}

/** The parser's state between chunks; `push` returns the events the text completed. */
export class EventStreamParser {
  private buffer = '';
  private afterCarriageReturn = false;
  private atStart = true;
  private eventType = '';
  private dataLines: string[] | undefined;
  private lastId: string | undefined;
  private retry: number | undefined;

  push(text: string): ServerSentEvent[] {
    if (text.length === 0) return [];
    if (this.atStart) {
      this.atStart = false;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    if (this.afterCarriageReturn && text.startsWith('\n')) text = text.slice(1);
    this.afterCarriageReturn = false;
    this.buffer += text;
    const events: ServerSentEvent[] = [];
    const lineEnd = /\r\n|\r|\n/g;
    let start = 0;
    for (let match = lineEnd.exec(this.buffer); match; match = lineEnd.exec(this.buffer)) {
      // A CR that ends the buffer may be half of a CRLF split across chunks.
      if (match[0] === '\r' && match.index === this.buffer.length - 1) this.afterCarriageReturn = true;
      const event = this.line(this.buffer.slice(start, match.index));
      if (event) events.push(event);
      start = match.index + match[0].length;
    }
    this.buffer = this.buffer.slice(start);
    return events;
  }

  private line(line: string): ServerSentEvent | undefined {
    if (line === '') return this.dispatch();
    if (line.startsWith(':')) return undefined;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    switch (field) {
      case 'event':
        this.eventType = value;
        break;
      case 'data':
        (this.dataLines ??= []).push(value);
        break;
      case 'id':
        if (!value.includes('\0')) this.lastId = value;
        break;
      case 'retry':
        if (/^\d+$/.test(value)) this.retry = Number(value);
        break;
    }
    return undefined;
  }

  private dispatch(): ServerSentEvent | undefined {
    const dataLines = this.dataLines;
    const eventType = this.eventType;
    this.dataLines = undefined;
    this.eventType = '';
    if (dataLines === undefined) return undefined;
    return { event: eventType || 'message', data: dataLines.join('\n'), id: this.lastId, retry: this.retry };
  }
}
