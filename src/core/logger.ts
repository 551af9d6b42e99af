import { pino, type Logger } from 'pino';

/**
 * planrun's structured logger: JSON lines on stderr (stdout stays for command output),
 * level from PLANRUN_LOG_LEVEL (default `info`).
 */
export function createLogger(name: string, level = process.env.PLANRUN_LOG_LEVEL ?? 'info'): Logger {
  return pino({ name, level }, pino.destination(2));
}

/** A logger that drops everything, for tests and libraries embedding planrun quietly. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
