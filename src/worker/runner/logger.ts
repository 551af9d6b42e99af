/** The part of a pino logger the runner uses, so any pino instance (or a test double) fits. */
export interface RunnerLogger {
  debug(fields: object, message: string): void;
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  error(fields: object, message: string): void;
}
