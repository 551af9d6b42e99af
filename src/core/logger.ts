import { pino, type Logger } from 'pino';
import { formatLogLine } from './console-log.js';

/** How log lines are written: JSON for log collectors, or one line for people to read. */
export type LogFormat = 'json' | 'console';

/**
 * planrun's structured logger on stderr (stdout stays for command output), level from
 * PLANRUN_LOG_LEVEL (default `info`), format from PLANRUN_LOG_FORMAT (default `json`;
 * `console` for lines a person reads, as `planrun up` writes them).
 */
export function createLogger(name: string, level = process.env.PLANRUN_LOG_LEVEL ?? 'info', format = logFormat(process.env.PLANRUN_LOG_FORMAT)): Logger {
  const destination = pino.destination({ fd: 2, sync: true });
  if (format === 'json') return pino({ name, level }, destination);
  const color = process.stderr.isTTY === true && !process.env.NO_COLOR;
  return pino({ name, level }, { write: (line: string) => destination.write(formatLogLine(line, { color })) });
}

/** PLANRUN_LOG_FORMAT as a LogFormat; anything else is JSON. */
export function logFormat(value: string | undefined): LogFormat {
  return value === 'console' ? 'console' : 'json';
}

/** A logger that drops everything, for tests and libraries embedding planrun quietly. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
