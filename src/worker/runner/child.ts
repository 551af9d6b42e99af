/**
 * The entry point of a job process, forked by ProcessPool. It loads the job modules once,
 * then runs one job at a time for as long as its parent keeps it, and never outlives it.
 */
import { PermanentError, TransientError, serializeError } from '../../core/errors.js';
import { isCommandJobType, loadJobTypeRegistry, type JobContext, type NodeJobType } from './job-type.js';
import { describeValue, findJsonProblem } from './json-value.js';
import { ProgressThrottle } from './progress-throttle.js';
import type { ChildConfig, ChildMessage, ParentMessage, RunTask } from './protocol.js';
import { outcomeOfReturnedValue, type RunOutcome } from './run-outcome.js';

const CRASH_EXIT_CODE = 1;
const LOAD_FAILED_EXIT_CODE = 78; // EX_CONFIG: the worker is misconfigured, not the job broken.

if (!process.send) {
  process.stderr.write('child.js runs job-type code for ProcessPool and must be forked by it\n');
  process.exit(2);
}

// The parent gone (even SIGKILLed) closes the IPC channel; a job left running would keep
// writing for an attempt whose lease nobody renews.
process.on('disconnect', () => process.exit(0));
// Ctrl-C reaches the whole process group; the parent decides how jobs end.
process.on('SIGINT', () => {});
process.on('uncaughtException', (error) => crash(`an uncaught exception: ${describeError(error)}`, error));
process.on('unhandledRejection', (reason) => crash(`an unhandled promise rejection: ${describeError(reason)}`, reason));

const config = JSON.parse(process.argv[2] ?? '{}') as ChildConfig;
// Where the process waits between jobs (see leaveJob).
const idleDir = process.cwd();
const registry = loadJobTypeRegistry(config.jobModuleUrls);
registry.then(
  () => send({ kind: 'ready' }),
  (error: unknown) => send({ kind: 'load_failed', message: describeError(error) }, () => process.exit(LOAD_FAILED_EXIT_CODE)),
);

let current: { runId: number; abort: JobAbort } | undefined;

process.on('message', (message: ParentMessage) => {
  if (message.kind === 'run') {
    enterJob(message.task, message.env);
    void run(message.runId, message.task);
  } else if (message.kind === 'abort' && current?.runId === message.runId) {
    current.abort.abort(new TransientError('aborted', 'the worker aborted the job'));
  }
});

async function run(runId: number, task: RunTask): Promise<void> {
  const abort = new JobAbort();
  current = { runId, abort };
  const throttle = new ProgressThrottle(config.progressThrottleMs, (report) => send({ kind: 'progress', runId, ...report }));
  const jobTypes = await registry.catch(() => undefined);
  // Without its job modules the process is already on its way out, reporting why.
  if (jobTypes === undefined) return;

  // A command job type runs in a process of its own, never in here.
  const found = jobTypes.get(task.type);
  const jobType = found === undefined || isCommandJobType(found) ? undefined : found;
  const log = (message: string, fields?: Record<string, unknown>) => {
    // A log line after the job returned is of no attempt any more.
    if (current?.runId === runId) send({ kind: 'log', runId, message, ...(fields === undefined ? {} : { fields }) });
  };
  const outcome = jobType ? await runJob(jobType, createContext(task, abort, throttle, log)) : unknownJobType(task.type, [...jobTypes.keys()]);
  // Flushes the last progress report before the result, and drops any the job makes later.
  throttle.close();
  current = undefined;
  leaveJob();
  // What the job printed is written out before its result leaves: a pipe write can wait in
  // this process, and the attempt's log closes soon after the result arrives.
  if (outputWaits()) await flushOutput();
  send({ kind: 'result', runId, outcome });
}

/**
 * A process runs one job after another (outside a sandbox): each gets exactly the
 * environment the worker computed for it, nothing left from the one before, and its
 * scratch folder as working directory.
 */
function enterJob(task: RunTask, env: Record<string, string>): void {
  for (const name of Object.keys(process.env)) {
    if (!(name in env)) delete process.env[name];
  }
  Object.assign(process.env, env);
  process.chdir(task.scratchDir);
}

/**
 * Out of the job's scratch folder before its result leaves, so that the worker removes a
 * folder no process is in. A folder removed while it is a process's working directory is
 * freed only when that process moves, and freeing it then cost this process about 0.2 ms of
 * CPU per job on ext4, where the worker's removal of an unused folder costs no more than
 * before (docs/performance.md). Staying is only slower, so a folder that cannot be
 * entered any more (a sandbox's) is no reason to fail.
 */
function leaveJob(): void {
  try {
    process.chdir(idleDir);
  } catch {
    // Left where it was.
  }
}

async function runJob(jobType: NodeJobType, ctx: JobContext): Promise<RunOutcome> {
  try {
    return outcomeOfReturnedValue(await jobType.run(ctx));
  } catch (error) {
    return { ok: false, error: serializeError(error) };
  }
}

/**
 * The job's abort signal, made when its code first asks for it: an AbortSignal is an
 * EventTarget, and making one was 4% of a job process's CPU per no-op job. An abort that
 * comes before is kept: the signal is then made aborted, with its reason.
 */
class JobAbort {
  private controller: AbortController | undefined;
  private reason: { given: unknown } | undefined;

  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController();
      if (this.reason) this.controller.abort(this.reason.given);
    }
    return this.controller.signal;
  }

  abort(reason: unknown): void {
    this.reason ??= { given: reason };
    this.controller?.abort(reason);
  }
}

function createContext(
  task: RunTask,
  abort: JobAbort,
  throttle: ProgressThrottle,
  log: (message: string, fields?: Record<string, unknown>) => void,
): JobContext {
  return {
    input: task.input,
    scratchDir: task.scratchDir,
    get signal() {
      return abort.signal;
    },
    jobId: task.jobId,
    attempt: task.attempt,
    tenant: task.tenant,
    progress(fraction: number, message?: string) {
      if (typeof fraction !== 'number' || Number.isNaN(fraction)) {
        throw new TypeError(`progress(fraction) needs a number from 0 to 1, got ${describeValue(fraction)}`);
      }
      throttle.report({
        fraction: Math.min(1, Math.max(0, fraction)),
        ...(message === undefined ? {} : { message: String(message) }),
      });
    },
    log(message: string, fields?: Record<string, unknown>) {
      if (fields !== undefined && (typeof fields !== 'object' || fields === null || Array.isArray(fields))) {
        throw new TypeError(`log(message, fields) needs fields to be an object when given, got ${describeValue(fields)}`);
      }
      const problem = fields === undefined ? undefined : findJsonProblem(fields, 'fields');
      if (problem !== undefined) throw new TypeError(`log(message, fields) needs plain JSON fields: ${problem}`);
      log(String(message), fields);
    },
  };
}

function unknownJobType(type: string, known: string[]): RunOutcome {
  const error = new PermanentError('unknown_job_type', `this worker has no job type "${type}" (it has: ${known.join(', ')})`);
  return { ok: false, error: error.toJSON() };
}

/** After an uncaught exception the job's state is unknown: say why, then exit so the process is replaced. */
function crash(description: string, error: unknown): void {
  process.stderr.write(`${error instanceof Error && error.stack ? error.stack : description}\n`);
  send({ kind: 'crashing', message: description }, () => process.exit(CRASH_EXIT_CODE));
}

/** Whether something the job wrote to stdout or stderr still waits in this process (a pipe that was full). */
function outputWaits(): boolean {
  return process.stdout.writableLength > 0 || process.stderr.writableLength > 0;
}

/** Resolves once everything written to stdout and stderr so far has left this process. */
function flushOutput(): Promise<void> {
  const flushed = (stream: NodeJS.WriteStream) => new Promise<void>((resolve) => stream.write('', () => resolve()));
  return Promise.all([flushed(process.stdout), flushed(process.stderr)]).then(() => undefined);
}

/** Sends to the parent; a closed channel means the parent is gone, and 'disconnect' ends us anyway. */
function send(message: ChildMessage, then?: () => void): void {
  process.send?.(message, undefined, {}, () => then?.());
}

function describeError(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
