/**
 * Server-sent events with the key: the browser's EventSource cannot send an Authorization
 * header, so the stream is read with fetch and parsed by eventsource-parser.
 */
import { createParser } from 'eventsource-parser';
import { request } from './api.js';

/**
 * Reads the event stream at `path` until the server ends it or `signal` aborts; calls
 * `onEvent` with each event's name and its data parsed as JSON.
 */
export async function readEvents(key: string, path: string, signal: AbortSignal, onEvent: (event: string, data: unknown) => void): Promise<void> {
  const response = await request(key, path, { headers: { accept: 'text/event-stream' }, signal });
  if (!response.body) throw new Error(`${path} answered no body`);
  const parser = createParser({ onEvent: (event) => onEvent(event.event ?? 'message', JSON.parse(event.data)) });
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      parser.feed(value);
    }
  } finally {
    reader.releaseLock();
  }
}
