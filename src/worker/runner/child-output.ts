import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import type { RunnerLogger } from './logger.js';

const STDERR_TAIL_CHARS = 8192;

/**
 * Forwards what a job process prints (to the logger line by line, tagged with the pid and
 * the job it was running, or else straight to this process's own stdout and stderr) and
 * keeps the end of its stderr, where V8 explains an out-of-memory death.
 */
export class ChildOutput {
  private tail = '';
  /** Resolves once both streams have ended, i.e. everything the process printed has been read. */
  readonly ended: Promise<void>;

  constructor(child: ChildProcess, logger: RunnerLogger | undefined, currentJobId: () => string | undefined) {
    const stdout = child.stdout as Readable;
    const stderr = child.stderr as Readable;
    stderr.setEncoding('utf8');
    stderr.on('data', (chunk: string) => {
      this.tail = (this.tail + chunk).slice(-STDERR_TAIL_CHARS);
    });
    if (logger) {
      const fields = () => ({ pid: child.pid, jobId: currentJobId() });
      createInterface({ input: stdout }).on('line', (line) => logger.info(fields(), line));
      createInterface({ input: stderr }).on('line', (line) => logger.warn(fields(), line));
    } else {
      stdout.on('data', (chunk: Buffer) => process.stdout.write(chunk));
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
