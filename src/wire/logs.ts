/**
 * A job's log, as the worker captures it, the ledger keeps it and the API serves it: one
 * entry per line the job's process wrote to stdout or stderr, or per `ctx.log()` call.
 */
import type { SchemaProperties } from './schema.js';

/** Where a line came from: the job process's stdout or stderr, or `ctx.log()` in job code; `planrun` for the marker of dropped lines. */
export type LogStream = 'stdout' | 'stderr' | 'log' | 'planrun';

/** One line as the worker sends it and the ledger keeps it (`at`: milliseconds since the epoch, the worker's clock). */
export interface LogEntry {
  at: number;
  stream: Exclude<LogStream, 'planrun'>;
  message: string;
  fields?: Record<string, unknown>;
}

/** What was left out of an attempt's log (the middle, between its first 64 KiB and its last 1 MiB). */
export interface LogDrop {
  bytes: number;
  lines: number;
}

/** Of each attempt's log the ledger keeps this much from the start... */
export const logHeadBytes = 64 * 1024;
/** ...and this much from the end; what lies between is counted, not kept. */
export const logTailBytes = 1024 * 1024;
/** The longest line kept whole: a longer one is cut there (a job printing megabytes without a newline). */
export const maxLogLineChars = 16 * 1024;

/** How much of the bounds a line takes: its message and fields as UTF-8, and its newline. */
export function logEntryBytes(entry: Pick<LogEntry, 'message' | 'fields'>): number {
  return Buffer.byteLength(entry.message) + (entry.fields === undefined ? 0 : Buffer.byteLength(JSON.stringify(entry.fields))) + 1;
}

/** One line as `GET /v1/jobs/:id/attempts/:n/logs` serves it (JSON lines, or the data of a `line` event). */
export interface LogLine {
  time: string;
  stream: LogStream;
  message: string;
  fields?: Record<string, unknown>;
  /** On the `planrun` marker line only: what was dropped where it stands. */
  dropped?: LogDrop;
}

export function toLogLine(entry: LogEntry): LogLine {
  return { time: new Date(entry.at).toISOString(), stream: entry.stream, message: entry.message, ...(entry.fields ? { fields: entry.fields } : {}) };
}

/** The line that stands where lines were dropped. */
export function dropMarker(dropped: LogDrop, at: number): LogLine {
  return {
    time: new Date(at).toISOString(),
    stream: 'planrun',
    message: `[planrun: ${dropped.lines} lines (${dropped.bytes} bytes) dropped here: an attempt's log keeps its first ${logHeadBytes / 1024} KiB and its last ${logTailBytes / 1024 / 1024} MiB]`,
    dropped,
  };
}

/** A log line as text: `<time> <stream> <message> [fields as JSON]`. */
export function formatLogLine(line: LogLine): string {
  return `${line.time} ${line.stream} ${line.message}${line.fields ? ` ${JSON.stringify(line.fields)}` : ''}`;
}

const logDropProperties = { bytes: { type: 'integer' }, lines: { type: 'integer' } } as const satisfies SchemaProperties<LogDrop>;

const logLineProperties = {
  time: { type: 'string', format: 'date-time' },
  stream: { type: 'string', enum: ['stdout', 'stderr', 'log', 'planrun'] },
  message: { type: 'string' },
  fields: { type: 'object', additionalProperties: true, description: 'what job code passed to ctx.log(message, fields)' },
  dropped: { type: 'object', properties: logDropProperties, description: 'on the `planrun` marker line: what was dropped where it stands' },
} as const satisfies SchemaProperties<LogLine>;

export const logLineSchema = { type: 'object', required: ['time', 'stream', 'message'], properties: logLineProperties } as const;
