import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import type { Readable } from 'node:stream';
import { maxLogLineChars } from '../../wire/logs.js';
import { readLines } from './line-reader.js';
import type { RunnerLogger } from './logger.js';

const STDERR_TAIL_CHARS = 8192;

/** Where a job process's lines go: the log of the attempt it is running. */
export type OutputLine = (stream: 'stdout' | 'stderr', line: string) => void;

/**
 * Reads what a job process prints, line by line (a line cut at maxLogLineChars), and hands
 * each line to `onLine` (the attempt's log) and to the logger at debug level, tagged with
 * the pid and the job it was running; without a logger its output goes straight to this
 * process's own stdout and stderr. Keeps the end of its stderr, where V8 explains an
 * out-of-memory death. Nothing waits on the reader: a job printing fast is never slowed.
 */
export class ChildOutput {
  private tail = '';
  /** Resolves once both streams have ended, i.e. everything the process printed has been read. */
  readonly ended: Promise<void>;

  constructor(child: ChildProcess, logger: RunnerLogger | undefined, currentJobId: () => string | undefined, onLine: OutputLine) {
    const stdout = child.stdout as Readable;
    const stderr = child.stderr as Readable;
    const fields = () => ({ pid: child.pid, jobId: currentJobId() });
    readLines(stdout, maxLogLineChars, (line) => {
      onLine('stdout', line);
      logger?.debug(fields(), line);
    });
    readLines(stderr, maxLogLineChars, (line) => {
      onLine('stderr', line);
      logger?.debug(fields(), line);
    });
    stderr.on('data', (chunk: string) => {
      this.tail = (this.tail + chunk).slice(-STDERR_TAIL_CHARS);
    });
    if (!logger) {
      stdout.on('data', (chunk: string) => process.stdout.write(chunk));
      stderr.on('data', (chunk: string) => process.stderr.write(chunk));
    }
    this.ended = Promise.all([once(stdout, 'close'), once(stderr, 'close')]).then(
      () => undefined,
      () => undefined,
    );
  }

  stderrTail(): string {
    return this.tail;
  }
}
