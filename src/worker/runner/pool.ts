import { PermanentError, TransientError, type SerializedError } from '../../core/errors.js';
import { toModuleUrl } from './job-type.js';
import { JobProcess, type RunHooks } from './job-process.js';
import { findJsonProblem } from './json-value.js';
import type { RunnerLogger } from './logger.js';
import { findInvalidOutput } from './outputs.js';
import type { RunTask } from './protocol.js';
import { failed, type RunOutcome } from './run-outcome.js';

export type { RunHooks } from './job-process.js';
export type { RunTask } from './protocol.js';
export type { RunOutcome } from './run-outcome.js';

export const DEFAULT_PROGRESS_THROTTLE_MS = 1000;
export const DEFAULT_ABORT_GRACE_MS = 10_000;

export interface ProcessPoolOptions {
  /** Job-types modules (paths or URLs) every job process loads. */
  jobModules: string[];
  /** How many job processes, i.e. how many jobs can run at once. */
  size: number;
  /** At most one progress report per job per this many ms; the first and last always pass. */
  progressThrottleMs?: number;
  /** How long an aborted job may take to stop before its process is killed. */
  abortGraceMs?: number;
  /** V8 heap limit of each job process; a job that exceeds it fails with `out_of_memory`. */
  maxOldSpaceMb?: number;
  /** Gets the job processes' output and the pool's notices; without it, their output goes to this process's. */
  logger?: RunnerLogger;
}

/**
 * Runs job-type code in child processes, one per slot, started eagerly and reused between
 * jobs; one that dies or is killed is replaced at once.
 *
 * `run()` never rejects for anything a job does: every failure is an outcome holding a
 * SerializedError, by class:
 * - whatever the job threw, class and code kept; anything not a planrun error is
 *   transient `unclassified` (the documented default);
 * - permanent: `unknown_job_type`, `invalid_input` (not plain JSON, or it could not be
 *   handed to the job process, e.g. nested too deep to serialise), `invalid_result`
 *   (run() returned something other than plain-JSON `{ data?, outputs? }`),
 *   `invalid_output` (an output that is not a regular file inside the scratch folder);
 * - transient: `child_crashed` (an exit, an uncaught exception or unhandled rejection),
 *   `child_killed` (a signal),
 *   `out_of_memory` (over `maxOldSpaceMb`), `aborted` (the signal fired and the job did
 *   not finish within the grace period, or the signal fired before it started),
 *   `pool_closed`, `output_check_failed`;
 * - fatal: `job_modules_failed`, `child_start_failed` (the worker itself is broken).
 * A job that finishes after its abort signal fired is reported as it finished.
 *
 * `run()` does reject when called on a closed pool or with every process busy: the
 * worker's admission owns waiting (it must not lease a job it cannot start, and only it
 * knows what else is waiting), so a queue here would only hide its bugs.
 */
export class ProcessPool {
  private readonly processes = new Set<JobProcess>();
  /** Ready or starting processes with no job; the most recently used is taken first. */
  private readonly idle: JobProcess[] = [];
  private broken: JobProcess | undefined;
  private closing: Promise<void> | undefined;
  private readonly settings: Required<Omit<ProcessPoolOptions, 'maxOldSpaceMb' | 'logger'>> & Pick<ProcessPoolOptions, 'maxOldSpaceMb' | 'logger'>;

  constructor(options: ProcessPoolOptions) {
    this.settings = validateOptions(options);
    for (let slot = 0; slot < this.settings.size; slot++) this.startProcess();
  }

  get size(): number {
    return this.settings.size;
  }

  /**
   * Resolves once every job process has loaded the job modules; rejects with the reason
   * if they cannot (a worker should await this before taking work).
   */
  async ready(): Promise<void> {
    await Promise.all([...this.processes].map((jobProcess) => jobProcess.started));
    const failure = this.broken?.startFailure;
    if (failure) throw new Error(failure.message);
  }

  async run(task: RunTask, hooks: RunHooks): Promise<RunOutcome> {
    if (this.closing) throw new Error(`ProcessPool.run(${task.jobId}): the pool is closed`);
    const startFailure = this.broken?.startFailure;
    if (startFailure) return failed(startFailure);
    const inputProblem = findJsonProblem(task.input, 'input');
    if (inputProblem !== undefined) {
      return failed(new PermanentError('invalid_input', `the job's input is not plain JSON: ${inputProblem}`).toJSON());
    }
    if (hooks.signal?.aborted) return failed(new TransientError('aborted', 'the job was aborted before it started').toJSON());

    const jobProcess = this.takeIdleProcess();
    if (jobProcess === undefined) {
      throw new Error(
        `ProcessPool.run(${task.jobId}): all ${this.size} job processes are busy; ` + "the worker's admission must not start more jobs than the pool has slots",
      );
    }
    let outcome: RunOutcome;
    try {
      outcome = await jobProcess.run(task, hooks);
    } finally {
      // Whatever happened to the run, the slot comes back: a usable process is idle again,
      // a gone one has been replaced.
      if (jobProcess.usable) this.idle.push(jobProcess);
    }
    return outcome.ok ? this.checkOutputs(task, outcome) : outcome;
  }

  /** Kills every job process and waits until they are gone; running jobs end transient `pool_closed`. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      const closed = new TransientError('pool_closed', 'the worker closed its job processes while the job was running').toJSON();
      const processes = [...this.processes];
      for (const jobProcess of processes) jobProcess.kill(closed);
      await Promise.all(processes.map((jobProcess) => jobProcess.gone));
    })();
    return this.closing;
  }

  private startProcess(): void {
    const { jobModules, progressThrottleMs, abortGraceMs, maxOldSpaceMb, logger } = this.settings;
    const jobProcess = new JobProcess({
      config: { jobModuleUrls: jobModules.map(toModuleUrl), progressThrottleMs },
      abortGraceMs,
      maxOldSpaceMb,
      logger,
      onGone: (gone) => this.replace(gone),
    });
    this.processes.add(jobProcess);
    this.idle.push(jobProcess);
  }

  /** A process that exited may still wait in `idle` until everything it said has been read. */
  private takeIdleProcess(): JobProcess | undefined {
    for (let candidate = this.idle.pop(); candidate !== undefined; candidate = this.idle.pop()) {
      if (candidate.usable) return candidate;
    }
    return undefined;
  }

  private replace(gone: JobProcess): void {
    this.processes.delete(gone);
    const idleIndex = this.idle.indexOf(gone);
    if (idleIndex >= 0) this.idle.splice(idleIndex, 1);
    if (this.closing) return;
    if (gone.startFailure) {
      // A replacement would fail the same way, over and over: stop, and fail every run fatally.
      this.broken ??= gone;
      this.settings.logger?.error({ pid: gone.pid, error: gone.startFailure }, 'job processes cannot start; the pool fails every run');
      return;
    }
    this.settings.logger?.warn({ pid: gone.pid }, 'a job process exited; starting a replacement');
    this.startProcess();
  }

  private async checkOutputs(task: RunTask, outcome: RunOutcome & { ok: true }): Promise<RunOutcome> {
    let invalid: SerializedError | undefined;
    try {
      invalid = await findInvalidOutput(task.scratchDir, outcome.result.outputs ?? []);
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      invalid = new TransientError('output_check_failed', `could not check the job's outputs in ${task.scratchDir}: ${reason}`).toJSON();
    }
    return invalid ? failed(invalid) : outcome;
  }
}

function validateOptions(options: ProcessPoolOptions): ProcessPool['settings'] {
  const settings = {
    jobModules: options.jobModules,
    size: options.size,
    progressThrottleMs: options.progressThrottleMs ?? DEFAULT_PROGRESS_THROTTLE_MS,
    abortGraceMs: options.abortGraceMs ?? DEFAULT_ABORT_GRACE_MS,
    maxOldSpaceMb: options.maxOldSpaceMb,
    logger: options.logger,
  };
  const problems: string[] = [];
  const { jobModules } = settings;
  if (!Array.isArray(jobModules) || jobModules.length === 0 || !jobModules.every((m) => typeof m === 'string' && m !== '')) {
    problems.push('jobModules must be a non-empty list of module paths or URLs');
  }
  if (!isWholeNumber(settings.size) || settings.size < 1) problems.push(`size must be a whole number >= 1, got ${String(settings.size)}`);
  for (const key of ['progressThrottleMs', 'abortGraceMs'] as const) {
    if (!isWholeNumber(settings[key])) problems.push(`${key} must be a whole number >= 0, got ${String(settings[key])}`);
  }
  if (settings.maxOldSpaceMb !== undefined && (!isWholeNumber(settings.maxOldSpaceMb) || settings.maxOldSpaceMb < 16)) {
    problems.push(`maxOldSpaceMb must be a whole number >= 16 (node needs that much to start), got ${settings.maxOldSpaceMb}`);
  }
  if (problems.length > 0) throw new RangeError(`invalid ProcessPool options: ${problems.join('; ')}`);
  return settings;
}

function isWholeNumber(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}
