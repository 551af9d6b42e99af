/**
 * The job-types module of a chaos run (`planrun worker --jobs <this file>`): one type,
 * `chaos`, whose every job misbehaves as its input says (see ChaosInput). It records in
 * the run's history (CHAOS_JOB_HISTORY, which the type declares) when each run
 * starts, what output it wrote (a sha256, so the checker can tell whose bytes were
 * stored), and when it raises an error on purpose.
 *
 * - ok, long, over-reserve: work `runMs` (long: past the broker's consumer timeout), then
 *   write `outputBytes` (over-reserve: many times the type's declared disk reserve).
 * - permanent: work, then throw a PermanentError.
 * - transient: work, then throw a TransientError on attempts before `failUntil`.
 * - crash: work, then die of an uncaught exception on attempts before `failUntil`.
 * - hang: attempt 1 blocks `hangMs` ignoring its abort signal (a worker that gives up on
 *   it has to kill it), then goes on as ok.
 * - fatal: attempt 1 throws a FatalError (its worker stops and exits); later ones are ok.
 */
import { createHash } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { FatalError, PermanentError, TransientError } from '../../src/core/errors.js';
import { defineJobType, type JobContext } from '../../src/worker/runner/job-type.js';
import { HistoryWriter, jobHistoryDirEnv } from './history.js';
import { chaosOutputFile, chaosOutputReserveBytes, type ChaosInput } from './job-input.js';

let writer: HistoryWriter | undefined;
/** Read when a job runs: a job process gets the environment of each job it runs, not before. */
function history(): HistoryWriter | undefined {
  const dir = process.env[jobHistoryDirEnv];
  if (dir && !writer) writer = new HistoryWriter(dir, 'job');
  return writer;
}

const chaos = defineJobType({
  name: 'chaos',
  outputReserveBytes: chaosOutputReserveBytes,
  env: [jobHistoryDirEnv],
  async run(ctx) {
    const input = ctx.input as ChaosInput;
    const { jobId, attempt } = ctx;
    history()?.record({ kind: 'run_start', jobId, attempt, tenant: ctx.tenant, behaviour: input.behaviour, ppid: process.ppid });
    const fails = input.failUntil !== undefined && attempt < input.failUntil;

    if (input.behaviour === 'hang' && attempt === 1) {
      history()?.record({ kind: 'run_hang', jobId, attempt, ms: input.hangMs ?? 0 });
      // Deaf to the abort signal on purpose.
      await delay(input.hangMs ?? 0);
    }
    await work(ctx, input.runMs);

    switch (input.behaviour) {
      case 'permanent':
        history()?.record({ kind: 'run_raise', jobId, attempt, class: 'permanent' });
        throw new PermanentError('chaos_permanent', 'the chaos job fails permanently, on purpose');
      case 'transient':
        if (fails) {
          history()?.record({ kind: 'run_raise', jobId, attempt, class: 'transient' });
          throw new TransientError('chaos_transient', `the chaos job fails transiently until attempt ${input.failUntil}, on purpose`);
        }
        break;
      case 'crash':
        if (fails) {
          history()?.record({ kind: 'run_raise', jobId, attempt, class: 'crash' });
          setTimeout(() => {
            throw new Error(`the chaos job crashes its process until attempt ${input.failUntil}, on purpose`);
          });
          return new Promise<never>(() => {});
        }
        break;
      case 'fatal':
        if (attempt === 1) {
          history()?.record({ kind: 'run_raise', jobId, attempt, class: 'fatal' });
          throw new FatalError('chaos_fatal', 'the chaos job says its worker is broken, on purpose');
        }
        break;
      default:
        break;
    }
    return writeOutput(ctx, input);
  },
});

/** Sleeps `ms` in a few steps, reporting progress, stopping when aborted. */
async function work(ctx: JobContext, ms: number): Promise<void> {
  const steps = Math.max(1, Math.min(5, Math.floor(ms / 200)));
  for (let step = 1; step <= steps; step++) {
    await delay(ms / steps, undefined, { signal: ctx.signal }).catch((error: unknown) => {
      ctx.signal.throwIfAborted();
      throw error;
    });
    ctx.progress(step / steps);
  }
}

/** Bytes that say which job, attempt and process wrote them; the checker compares digests. */
async function writeOutput(ctx: JobContext, input: ChaosInput) {
  const header = `chaos job ${ctx.jobId} attempt ${ctx.attempt} pid ${process.pid} nonce ${input.nonce} at ${Date.now()}\n`;
  const content = Buffer.alloc(Math.max(input.outputBytes, header.length), '.');
  content.write(header, 0);
  await writeFile(join(ctx.scratchDir, chaosOutputFile), content);
  const sha256 = createHash('sha256').update(content).digest('hex');
  history()?.record({ kind: 'run_output', jobId: ctx.jobId, attempt: ctx.attempt, bytes: content.length, sha256 });
  return { data: { attempt: ctx.attempt, sha256, bytes: content.length }, outputs: [chaosOutputFile] };
}

export default [chaos];
