import { open } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { FatalError, PermanentError, TransientError } from '../core/errors.js';
import { defineJobType, type JobContext } from '../worker/runner/job-type.js';

export const FAILURE_MODES = ['permanent', 'transient', 'fatal', 'crash', 'hang'] as const;
export type SleepFailure = (typeof FAILURE_MODES)[number];

export interface SleepInput {
  ms: number;
  steps?: number;
  outputBytes?: number;
  fail?: SleepFailure;
}

export const SLEEP_OUTPUT_FILE = 'sleep-output.bin';
const WRITE_CHUNK_BYTES = 1 << 16;

/**
 * `sleep`: waits, reporting progress as it goes, and fails on demand in every way a job
 * can. planrun's own tests drive workers with it; it is also a small complete job type.
 *
 * Input `{ ms, steps?, outputBytes?, fail? }`:
 * - `ms` (required, a number >= 0): how long to sleep in all.
 * - `steps` (a whole number >= 1, default 10): the sleep is cut into `steps` equal parts
 *   (measured from the start, so timer drift does not add up); after part i it reports
 *   `progress(i / steps, "step i of steps")`.
 * - `outputBytes` (a whole number >= 0): after sleeping, writes `sleep-output.bin`, that
 *   many bytes, into the scratch folder and lists it in `outputs`.
 * - `fail`: after sleeping (and writing the output, if asked), fails on purpose:
 *   - `'permanent'`, `'transient'`, `'fatal'`: throws that class, code `requested_<class>`;
 *   - `'crash'`: throws from a timer, an uncaught exception that takes the process down;
 *   - `'hang'`: never returns, and ignores the abort signal from the start (so the worker
 *     has to kill it once the abort grace period is over).
 *
 * Abort: unless `fail` is `'hang'`, the job stops as soon as `ctx.signal` aborts and
 * throws the signal's reason (the runner's is transient `aborted`).
 *
 * Result: `{ data: { sleptMs: ms, steps }, outputs?: ['sleep-output.bin'] }`. An input
 * that breaks these rules fails permanently with code `invalid_input`.
 */
export const sleep = defineJobType({
  name: 'sleep',
  async run(ctx) {
    const { ms, steps = 10, outputBytes, fail } = parseInput(ctx.input);
    // With 'hang' the job must not react to the abort in any phase.
    const signal = fail === 'hang' ? undefined : ctx.signal;
    const startedAt = Date.now();
    for (let step = 1; step <= steps; step++) {
      await wait(startedAt + (ms * step) / steps - Date.now(), signal);
      ctx.progress(step / steps, `step ${step} of ${steps}`);
    }
    if (outputBytes !== undefined) await writeOutput(ctx, outputBytes, signal);
    if (fail !== undefined) await failAsRequested(fail);
    return {
      data: { sleptMs: ms, steps },
      ...(outputBytes === undefined ? {} : { outputs: [SLEEP_OUTPUT_FILE] }),
    };
  },
});

async function wait(ms: number, signal: AbortSignal | undefined): Promise<void> {
  signal?.throwIfAborted();
  if (ms <= 0) return;
  try {
    await delay(ms, undefined, signal ? { signal } : {});
  } catch (error) {
    // Node rejects with its own AbortError; the signal's reason says who aborted and why.
    signal?.throwIfAborted();
    throw error;
  }
}

async function writeOutput(ctx: JobContext, bytes: number, signal: AbortSignal | undefined): Promise<void> {
  const chunk = Buffer.alloc(Math.min(bytes, WRITE_CHUNK_BYTES), 'planrun\n');
  const file = await open(path.join(ctx.scratchDir, SLEEP_OUTPUT_FILE), 'w');
  try {
    for (let written = 0; written < bytes;) {
      signal?.throwIfAborted();
      const { bytesWritten } = await file.write(chunk, 0, Math.min(chunk.length, bytes - written));
      written += bytesWritten;
    }
  } finally {
    await file.close();
  }
}

async function failAsRequested(fail: SleepFailure): Promise<never> {
  const message = `sleep failed on purpose (fail: "${fail}")`;
  switch (fail) {
    case 'permanent':
      throw new PermanentError('requested_permanent', message);
    case 'transient':
      throw new TransientError('requested_transient', message);
    case 'fatal':
      throw new FatalError('requested_fatal', message);
    case 'crash':
      setTimeout(() => {
        throw new Error(message);
      });
      return new Promise<never>(() => {});
    case 'hang':
      return new Promise<never>(() => {});
  }
}

function parseInput(input: unknown): SleepInput {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw invalid('the input must be an object { ms, steps?, outputBytes?, fail? }');
  }
  const { ms, steps, outputBytes, fail } = input as Record<string, unknown>;
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) throw invalid('ms must be a number >= 0');
  if (steps !== undefined && !(Number.isSafeInteger(steps) && (steps as number) >= 1)) {
    throw invalid('steps must be a whole number >= 1');
  }
  if (outputBytes !== undefined && !(Number.isSafeInteger(outputBytes) && (outputBytes as number) >= 0)) {
    throw invalid('outputBytes must be a whole number >= 0');
  }
  if (fail !== undefined && !FAILURE_MODES.includes(fail as SleepFailure)) {
    throw invalid(`fail must be one of ${FAILURE_MODES.map((mode) => `"${mode}"`).join(', ')}`);
  }
  return input as SleepInput;
}

function invalid(message: string): PermanentError {
  return new PermanentError('invalid_input', `sleep: ${message}`);
}
