import { TransientError, type SerializedError } from '../../core/errors.js';

/** What is known about a job process that died on its own. */
export interface ChildDeath {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  /** What the child said just before exiting on an uncaught exception. */
  crashMessage: string | undefined;
  /** The end of its stderr, where V8 writes why it gave up. */
  stderrTail: string;
  maxOldSpaceMb: number | undefined;
}

// Written by V8 before it aborts the process for want of heap ("Reached heap limit",
// "JavaScript heap out of memory").
const OUT_OF_MEMORY_MARKERS = ['JavaScript heap out of memory', 'Reached heap limit'];

/**
 * A dying process takes only itself down: the job may well succeed on another attempt (or
 * another machine), so every death is transient. The code says what kind of death it was.
 */
export function describeDeath(death: ChildDeath): SerializedError {
  const how = death.signal !== null ? `was killed by ${death.signal}` : `exited with code ${death.exitCode}`;
  if (OUT_OF_MEMORY_MARKERS.some((marker) => death.stderrTail.includes(marker))) {
    const limit = death.maxOldSpaceMb === undefined ? '' : ` (heap limit ${death.maxOldSpaceMb} MB)`;
    return new TransientError('out_of_memory', `the job process ran out of memory${limit} and ${how}`).toJSON();
  }
  if (death.crashMessage !== undefined) {
    return new TransientError('child_crashed', `the job process crashed on ${death.crashMessage} and ${how}`).toJSON();
  }
  if (death.signal !== null) {
    const hint = death.signal === 'SIGKILL' ? ' (by someone else, or by the system for want of memory)' : '';
    return new TransientError('child_killed', `the job process ${how}${hint} while running the job`).toJSON();
  }
  return new TransientError('child_crashed', `the job process ${how} while running the job`).toJSON();
}
