const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** Parses `500ms`, `4s`, `2m`, `1h`, `14d` (or a bare number of milliseconds) into milliseconds. */
export function parseDuration(text: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(text);
  if (!match) throw new TypeError(`not a duration: "${text}" (expected e.g. 500ms, 4s, 2m, 1h, 14d)`);
  const value = Number(match[1]) * units[match[2] ?? 'ms']!;
  return Math.round(value);
}

export function formatDuration(ms: number): string {
  // Whole days from two up (a day itself reads 24h, as it always did).
  if (ms % 86_400_000 === 0 && ms >= 2 * 86_400_000) return `${ms / 86_400_000}d`;
  if (ms % 3_600_000 === 0 && ms > 0) return `${ms / 3_600_000}h`;
  if (ms % 60_000 === 0 && ms > 0) return `${ms / 60_000}m`;
  if (ms % 1000 === 0 && ms > 0) return `${ms / 1000}s`;
  return `${ms}ms`;
}
