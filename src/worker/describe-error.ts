/** An error in one line, for the worker's logs (anything may be thrown, not only Errors). */
export function describeError(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
