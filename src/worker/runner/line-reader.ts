import type { Readable } from 'node:stream';

/**
 * Calls `onLine` with each line `stream` carries (without its `\n` or `\r\n`), the last one
 * too when the stream ends without a newline. A line longer than `maxChars` comes out in
 * pieces of `maxChars`: a job printing megabytes without a newline costs no more memory
 * than one piece. (node:readline keeps a line whole, however long.)
 */
export function readLines(stream: Readable, maxChars: number, onLine: (line: string) => void): void {
  let partial = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk: string) => {
    let start = 0;
    for (let newline = chunk.indexOf('\n'); newline !== -1; newline = chunk.indexOf('\n', start)) {
      const line = partial + chunk.slice(start, newline);
      partial = '';
      emitCut(line.endsWith('\r') ? line.slice(0, -1) : line, maxChars, onLine);
      start = newline + 1;
    }
    partial += chunk.slice(start);
    while (partial.length > maxChars) {
      onLine(partial.slice(0, maxChars));
      partial = partial.slice(maxChars);
    }
  });
  stream.on('end', () => {
    if (partial !== '') onLine(partial);
    partial = '';
  });
}

function emitCut(line: string, maxChars: number, onLine: (line: string) => void): void {
  if (line.length <= maxChars) {
    onLine(line);
    return;
  }
  for (let start = 0; start < line.length; start += maxChars) onLine(line.slice(start, start + maxChars));
}
