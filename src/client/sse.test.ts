import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { EventStreamParser, parseEventStream, type ServerSentEvent } from './sse.js';

async function* chunksOf(...parts: Array<string | Uint8Array>): AsyncGenerator<Uint8Array> {
  for (const part of parts) yield typeof part === 'string' ? new TextEncoder().encode(part) : part;
}

async function collect(stream: AsyncIterable<ServerSentEvent>): Promise<ServerSentEvent[]> {
  const events: ServerSentEvent[] = [];
  for await (const event of stream) events.push(event);
  return events;
}

describe('the event-stream parser', () => {
  it('reads named events, joins data lines and skips comments', async () => {
    const events = await collect(
      parseEventStream(chunksOf(': keep-alive\n\nevent: state\ndata: {"a":1,\ndata: "b":2}\n\nevent: progress\ndata:{"p":0.5}\n\n')),
    );
    assert.deepEqual(
      events.map((e) => [e.event, e.data]),
      [
        ['state', '{"a":1,\n"b":2}'],
        ['progress', '{"p":0.5}'],
      ],
    );
  });

  it('puts together an event split across chunks at every byte', async () => {
    const text = 'id: 7\nevent: progress\r\ndata: {"message":"étape 2 ✓"}\r\n\r\nevent: state\rdata: {"state":"finished"}\r\r';
    const bytes = new TextEncoder().encode(text);
    const whole = await collect(parseEventStream(chunksOf(bytes)));
    assert.equal(whole.length, 2);
    for (let cut = 1; cut < bytes.length; cut++) {
      const split = await collect(parseEventStream(chunksOf(bytes.subarray(0, cut), bytes.subarray(cut))));
      assert.deepEqual(split, whole, `split at byte ${cut}`);
    }
    const oneByteAtATime = await collect(parseEventStream(chunksOf(...Array.from(bytes, (b) => Uint8Array.of(b)))));
    assert.deepEqual(oneByteAtATime, whole);
    assert.deepEqual(whole[0], { event: 'progress', data: '{"message":"étape 2 ✓"}', id: '7', retry: undefined });
    assert.equal(whole[1]!.id, '7', 'an id carries over to later events');
  });

  it('treats a CR ending one chunk and an LF starting the next as one line end', () => {
    const parser = new EventStreamParser();
    assert.deepEqual(parser.push('data: a\r'), []);
    assert.deepEqual(parser.push('\n'), [], 'the LF of a split CRLF is not a blank line');
    assert.deepEqual(
      parser.push('\r\n').map((e) => e.data),
      ['a'],
    );
  });

  it('drops an event the stream ended in the middle of', async () => {
    const events = await collect(parseEventStream(chunksOf('event: state\ndata: {"state":"running"}\n\nevent: state\ndata: {"state":"fini')));
    assert.deepEqual(
      events.map((e) => e.data),
      ['{"state":"running"}'],
    );
  });

  it('keeps the retry the server asks for and ignores events without data', async () => {
    const events = await collect(parseEventStream(chunksOf('retry: 1500\n\nevent: state\n\ndata\n\n')));
    assert.deepEqual(events, [{ event: 'message', data: '', id: undefined, retry: 1500 }]);
  });
});
