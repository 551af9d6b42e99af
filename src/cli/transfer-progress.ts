import { progressBar } from './job-output.js';

/**
 * The progress line of a file going out (`submit --file`). On a terminal it redraws one
 * line in place, at most every `redrawMs`; elsewhere it stays quiet (a log would only get
 * noise).
 */
export class TransferProgress {
  private lastDraw = 0;
  private drawn = false;
  private readonly tty: boolean;

  constructor(
    private readonly out: NodeJS.WriteStream,
    private readonly what: string,
    private readonly redrawMs = 100,
  ) {
    this.tty = Boolean(out.isTTY);
  }

  update(sent: number, total: number): void {
    if (!this.tty) return;
    const now = Date.now();
    if (sent < total && now - this.lastDraw < this.redrawMs) return;
    this.lastDraw = now;
    this.drawn = true;
    const percent = total === 0 ? 100 : Math.floor((sent / total) * 100);
    const columns = this.out.columns || 80;
    const line = `uploading ${this.what} ${String(percent).padStart(3)}% ${progressBar(total === 0 ? 1 : sent / total, 24)} ${humanBytes(sent)} of ${humanBytes(total)}`;
    this.out.write(`\r\x1b[2K${line.slice(0, columns - 1)}`);
  }

  /** Clears the progress line. */
  finish(): void {
    if (this.drawn) this.out.write('\r\x1b[2K');
    this.drawn = false;
  }
}

/** A size for a person to read: `812 B`, `12.3 MiB`. */
export function humanBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
}
