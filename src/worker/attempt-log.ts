import { MAX_ERROR_LOG_TAIL_LINES } from '../core/errors.js';
import type { LogsReply } from '../control/protocol.js';
import type { LeaseLoss } from '../ledger/ledger.js';
import { logEntryBytes, logHeadBytes, logTailBytes, maxLogLineChars, type LogDrop, type LogEntry } from '../wire/logs.js';

/** A batch is sent at once when this much waits, else after the flush interval. */
export const logBatchBytes = 64 * 1024;
/** Most bytes of lines in one `logs` request. */
const maxRequestBytes = 256 * 1024;
const maxRequestLines = 5_000;

export interface AttemptLogOptions {
  /** Sends one batch (the control plane's `logs`); rejects when it could not be asked. */
  send(batch: { lines: LogEntry[]; dropped?: LogDrop }): Promise<LogsReply>;
  now(): number;
  /** A line waits at most this long before it is sent with the lines after it. */
  flushMs: number;
  /** The orchestrator refused the lines: the lease is no longer this attempt's. */
  refused(reason: LeaseLoss): void;
  /** A batch could not be sent (its lines are counted as dropped). */
  failed(error: unknown): void;
}

/**
 * One attempt's log on its way to the orchestrator: what the job prints and `ctx.log()`s,
 * timestamped as it comes, sent in batches over the control plane, one batch in flight at
 * a time. Memory stays bounded however fast the job prints: the first logHeadBytes are
 * always kept for sending (the ledger keeps them), and of the rest at most the last
 * logTailBytes wait; older lines are dropped here, counted, and the count goes with the
 * next batch, as the ledger would have dropped them anyway. The last lines are kept for
 * the error of a failed run (`logTail`).
 */
export class AttemptLog {
  private head: LogEntry[] = [];
  private headBytes = 0;
  private tail: LogEntry[] = [];
  private tailBytes = 0;
  /** Bytes of every line taken so far: the head is the first logHeadBytes of them. */
  private takenBytes = 0;
  private dropped: LogDrop = { bytes: 0, lines: 0 };
  private readonly recent: string[] = [];
  private inFlight: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  /** The head is over (a line did not fit, or lines were dropped): every later line is of the tail. */
  private headOver = false;
  /** A send failed while closing: the orchestrator cannot be reached, what waits is given up. */
  private gaveUp = false;

  constructor(private readonly options: AttemptLogOptions) {}

  add(stream: LogEntry['stream'], message: string, fields?: Record<string, unknown>): void {
    if (this.stopped) return;
    const entry: LogEntry = {
      at: this.options.now(),
      stream,
      message: message.length > maxLogLineChars ? message.slice(0, maxLogLineChars) : message,
      ...(fields === undefined ? {} : { fields }),
    };
    this.remember(entry.message);
    const bytes = logEntryBytes(entry);
    const inHead = !this.headOver && this.takenBytes + bytes <= logHeadBytes;
    if (!inHead) this.headOver = true;
    this.takenBytes += bytes;
    if (inHead) {
      this.head.push(entry);
      this.headBytes += bytes;
    } else {
      this.tail.push(entry);
      this.tailBytes += bytes;
      while (this.tailBytes > logTailBytes && this.tail.length > 1) this.drop(this.tail.shift()!);
    }
    if (this.waitingBytes() >= logBatchBytes) this.sendNext();
    else this.timer ??= setTimeout(() => this.sendNext(), this.options.flushMs);
  }

  /** The last lines, for the error of a failed run (empty when the job printed nothing). */
  logTail(): string {
    return this.recent.join('\n');
  }

  /** Takes no more lines and sends what waits; resolves once it was sent (or given up on). */
  async close(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.inFlight;
    while (!this.gaveUp && (this.head.length > 0 || this.tail.length > 0 || this.dropped.lines > 0)) {
      this.sendNext();
      await this.inFlight;
    }
  }

  private remember(message: string): void {
    this.recent.push(message);
    if (this.recent.length > MAX_ERROR_LOG_TAIL_LINES) this.recent.shift();
  }

  private drop(entry: LogEntry): void {
    const bytes = logEntryBytes(entry);
    this.tailBytes -= bytes;
    this.dropped.bytes += bytes;
    this.dropped.lines += 1;
  }

  private waitingBytes(): number {
    return this.headBytes + this.tailBytes;
  }

  /** Sends the oldest waiting lines, unless a batch is in flight (its end sends the next). */
  private sendNext(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.inFlight) return;
    const lines: LogEntry[] = [];
    let bytes = 0;
    const take = (from: LogEntry[]): void => {
      while (from.length > 0 && lines.length < maxRequestLines && bytes < maxRequestBytes) {
        const entry = from.shift()!;
        bytes += logEntryBytes(entry);
        lines.push(entry);
      }
    };
    take(this.head);
    this.headBytes -= bytes;
    const tookTail = this.head.length === 0 && this.tail.length > 0;
    if (tookTail) {
      const before = bytes;
      take(this.tail);
      this.tailBytes -= bytes - before;
    }
    // What was dropped lies before the oldest tail line waiting: it goes with the batch that carries that line.
    const dropped = this.dropped.lines > 0 && (tookTail || (this.head.length === 0 && this.tail.length === 0)) ? this.dropped : undefined;
    if (lines.length === 0 && !dropped) return;
    if (dropped) this.dropped = { bytes: 0, lines: 0 };
    this.inFlight = this.sendBatch(lines, bytes, dropped).finally(() => {
      this.inFlight = undefined;
      if (this.stopped) return;
      if (this.waitingBytes() >= logBatchBytes) this.sendNext();
      else if (this.head.length > 0 || this.tail.length > 0) this.timer ??= setTimeout(() => this.sendNext(), this.options.flushMs);
    });
  }

  private async sendBatch(lines: LogEntry[], bytes: number, dropped: LogDrop | undefined): Promise<void> {
    try {
      const reply = await this.options.send({ lines, ...(dropped ? { dropped } : {}) });
      if (!reply.accepted) {
        this.stopped = true;
        this.head = [];
        this.tail = [];
        this.dropped = { bytes: 0, lines: 0 };
        this.options.refused(reply.reason);
      }
    } catch (error) {
      // Not confirmed: counted as dropped (it may have been kept; a count too high says so less badly than lines twice).
      this.dropped.bytes += bytes + (dropped?.bytes ?? 0);
      this.dropped.lines += lines.length + (dropped?.lines ?? 0);
      if (this.stopped) this.gaveUp = true;
      this.options.failed(error);
    }
  }
}
