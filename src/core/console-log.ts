/**
 * planrun's log lines for people: one line per event, `12:04:05 INFO  worker 4121  worker
 * ready  worker=host-4121-x`, instead of pino's JSON. Used where a person watches the
 * console (`planrun up`, and its workers); JSON stays the default everywhere else, for
 * log collectors.
 */
const levels: Record<number, { label: string; color: string }> = {
  10: { label: 'TRACE', color: '\x1b[90m' },
  20: { label: 'DEBUG', color: '\x1b[90m' },
  30: { label: 'INFO ', color: '\x1b[36m' },
  40: { label: 'WARN ', color: '\x1b[33m' },
  50: { label: 'ERROR', color: '\x1b[31m' },
  60: { label: 'FATAL', color: '\x1b[41m' },
};
const reset = '\x1b[0m';
const dim = '\x1b[2m';

/** Fields every line has; shown in the prefix, not as key=value. */
const framing = new Set(['level', 'time', 'pid', 'hostname', 'name', 'msg', 'part', 'v']);

export interface ConsoleFormatOptions {
  /** ANSI colours (a terminal that wants them). */
  color: boolean;
}

/** One pino JSON line as a line for people; anything that is not pino JSON goes through unchanged. */
export function formatLogLine(line: string, options: ConsoleFormatOptions): string {
  let record: Record<string, unknown>;
  try {
    record = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line.endsWith('\n') ? line : `${line}\n`;
  }
  if (typeof record !== 'object' || record === null) return `${line.trimEnd()}\n`;
  const level = levels[Number(record.level)] ?? { label: String(record.level).toUpperCase().padEnd(5), color: '' };
  const time = typeof record.time === 'number' ? new Date(record.time) : new Date();
  const clock = `${pad(time.getHours())}:${pad(time.getMinutes())}:${pad(time.getSeconds())}`;
  const fields: string[] = [];
  let stack: string | undefined;
  for (const [key, value] of Object.entries(record)) {
    if (framing.has(key) || value === undefined) continue;
    if ((key === 'err' || key === 'error') && value !== null && typeof value === 'object') {
      const error = value as { message?: unknown; code?: unknown; stack?: unknown };
      const code = typeof error.code === 'string' ? `${error.code}: ` : '';
      fields.push(`${key}=${show(`${code}${typeof error.message === 'string' ? error.message : JSON.stringify(value)}`)}`);
      if (Number(record.level) >= 50 && typeof error.stack === 'string') stack = error.stack;
      continue;
    }
    fields.push(`${key}=${show(value)}`);
  }
  const source = sourceOf(record);
  const paint = (text: string, color: string) => (options.color && color ? `${color}${text}${reset}` : text);
  const parts = [paint(clock, dim), paint(level.label, level.color), paint(source, dim), typeof record.msg === 'string' ? record.msg : ''];
  if (fields.length > 0) parts.push(paint(fields.join(' '), dim));
  let out = `${parts.join('  ')}\n`;
  if (stack)
    out += `${stack
      .split('\n')
      .map((l) => `    ${l.trim()}`)
      .join('\n')}\n`;
  return out;
}

/** `worker 4121`, `up`, `up/api`: which process (and part of it) spoke. */
function sourceOf(record: Record<string, unknown>): string {
  const name = typeof record.name === 'string' ? record.name.replace(/^planrun-?/, '') || 'planrun' : 'planrun';
  const base = name === 'worker' && typeof record.pid === 'number' ? `worker ${record.pid}` : name;
  return typeof record.part === 'string' ? `${base}/${record.part}` : base;
}

function show(value: unknown): string {
  if (typeof value === 'string') return /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value);
  if (Array.isArray(value) && value.every((item) => typeof item === 'string' && /^[^\s",=]+$/.test(item))) return value.join(',') || '[]';
  return JSON.stringify(value);
}

function pad(n: number): string {
  return String(n).padStart(2, '0');
}
