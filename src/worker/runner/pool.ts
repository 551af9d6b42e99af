import { execFile, spawnSync } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { chown, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { FatalError, PermanentError, TransientError, type SerializedError } from '../../core/errors.js';
import { CommandProcess } from './command-process.js';
import { resolveCommandPrograms } from './command-program.js';
import { envNameProblem, jobEnvironment } from './job-env.js';
import { isCommandJobType, loadJobTypeRegistry, toModuleUrl, type CommandJobType, type JobType } from './job-type.js';
import { JobCgroup, type CgroupLimits } from './job-cgroup.js';
import { LimitEnforcement } from './limit-enforcement.js';
import { CHILD_ENTRY, JobProcess, type RunDeadline, type RunHooks } from './job-process.js';
import { findJsonProblem } from './json-value.js';
import type { RunnerLogger } from './logger.js';
import { findInvalidOutput } from './outputs.js';
import type { RunTask } from './protocol.js';
import { failed, type RunOutcome } from './run-outcome.js';
import { ScratchQuota } from './scratch-usage.js';
import { checkSandbox, isSystemPath, moduleReadablePaths, wrapCommand, type ProcessLimits, type SandboxPolicy } from './sandbox.js';

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
  /** How job processes are confined (default: no sandbox, the worker's user). */
  sandbox?: SandboxPolicy;
  /** Environment variables the operator hands to every job (`--job-env`), beside those a job type declares. */
  jobEnv?: string[];
  /** How long a run may take when neither its submission nor its job type says (default: no limit). */
  jobTimeoutMs?: number;
  /**
   * Where the jobs' scratch folders are made: the trial process of `ready()` gets one there
   * too, so a job user that cannot reach it is known before any job (default: the system's temp).
   */
  scratchRoot?: string;
  /**
   * `rlimit`: hold job limits with setrlimit even where this machine has cgroups for them
   * (default: a cgroup where there is one, else setrlimit; see limit-enforcement.ts).
   */
  limitsBy?: 'auto' | 'rlimit';
  /**
   * Flags for the `node` of every job process, before its entry script (the benchmark's
   * `--cpu-prof`): none by default, as a job process gets none of this process's flags.
   */
  nodeFlags?: string[];
}

const execFileAsync = promisify(execFile);

// planrun's compiled sources (dist/): a sandboxed job process runs child.js from there.
const PLANRUN_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/**
 * Runs job-type code in child processes. Without a sandbox or job user, one per slot,
 * started eagerly and reused between jobs (each run gets its own environment and working
 * directory); one that dies or is killed is replaced at once. In a sandbox or as another
 * user, a process is started for each job, confined to that job's scratch folder, and
 * ends with it: a process that held one job's files never sees another's.
 *
 * `run()` never rejects for anything a job does: every failure is an outcome holding a
 * SerializedError, by class:
 * - whatever the job threw, class and code kept; anything not a planrun error is
 *   transient `unclassified` (the documented default);
 * - permanent: `unknown_job_type`, `invalid_input` (not plain JSON, or it could not be
 *   handed to the job process, e.g. nested too deep to serialise), `invalid_result`
 *   (run() returned something other than plain-JSON `{ data?, outputs? }`),
 *   `invalid_output` (an output that is not a regular file inside the scratch folder);
 * - transient: `timeout` (past its deadline; permanent when its type says so),
 *   `child_crashed` (an exit, an uncaught exception or unhandled rejection),
 *   `child_killed` (a signal),
 *   `out_of_memory` (over `maxOldSpaceMb`), `aborted` (the signal fired and the job did
 *   not finish within the grace period, or the signal fired before it started),
 *   `pool_closed`, `output_check_failed`;
 * - fatal: `job_modules_failed`, `child_start_failed` (the worker itself is broken).
 * A command job type's exit codes and its own codes (`data_error`, `temporary_failure`,
 * `software_error`, `command_not_found`, ...) are listed in docs/job-protocol.md.
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
  /** Jobs running in processes of their own (sandbox or job user). */
  private ownProcessRuns = 0;
  private broken: JobProcess | undefined;
  private closing: Promise<void> | undefined;
  private jobTypes: Promise<Map<string, JobType>> | undefined;
  /** The argv each command job type runs, its program found (see command-program.ts). */
  private commands: Promise<Map<string, string[]>> | undefined;
  private readonly settings: Settings;
  private readonly enforcement: LimitEnforcement;

  constructor(options: ProcessPoolOptions) {
    this.settings = validateOptions(options);
    checkSandbox(this.settings.sandbox);
    this.enforcement = new LimitEnforcement({ jobUser: this.settings.sandbox.jobUser !== undefined, rlimitOnly: this.settings.limitsBy === 'rlimit' });
    if (!this.processPerJob) for (let slot = 0; slot < this.settings.size; slot++) this.startProcess();
  }

  get size(): number {
    return this.settings.size;
  }

  /** What holds each kind of job limit in this pool, for the worker's log. */
  describeLimits(): string {
    return this.enforcement.describe();
  }

  /** A sandbox is built around one job's scratch folder, and another user's process must not keep one job's secrets for the next. */
  private get processPerJob(): boolean {
    return this.settings.sandbox.kind !== 'none' || this.settings.sandbox.jobUser !== undefined;
  }

  /**
   * Resolves once every job process has loaded the job modules (in a sandbox: once a trial
   * process has, so a sandbox that cannot start is known before any job); rejects with the
   * reason if they cannot (a worker should await this before taking work).
   */
  async ready(): Promise<void> {
    const jobTypes = await this.loadJobTypes();
    this.checkLimitsEnforceable([...jobTypes.values()]);
    await this.loadCommands();
    if (this.processPerJob) {
      await this.tryOwnProcess();
      return;
    }
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

    let settings: JobSettings;
    try {
      settings = await this.jobSettings(task);
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      return failed(new TransientError('child_start_failed', `the job could not be set up: ${reason}`).toJSON());
    }
    const outcome =
      settings.jobType !== undefined && isCommandJobType(settings.jobType)
        ? await this.runCommand(task, hooks, settings, settings.jobType)
        : this.processPerJob || settings.limits !== undefined
          ? await this.runInOwnProcess(task, hooks, settings)
          : await this.runInPooledProcess(task, hooks, settings);
    return outcome.ok ? this.checkOutputs(task, outcome) : outcome;
  }

  private async runInPooledProcess(task: RunTask, hooks: RunHooks, { env, deadline, watches }: JobSettings): Promise<RunOutcome> {
    const jobProcess = this.takeIdleProcess();
    if (jobProcess === undefined) throw this.allBusy(task);
    try {
      return await this.runLimited(jobProcess, () => jobProcess.run(task, env, hooks, deadline), watches);
    } finally {
      // Whatever happened to the run, the slot comes back: a usable process is idle again,
      // a gone one has been replaced.
      if (jobProcess.usable) this.idle.push(jobProcess);
    }
  }

  /** A process of its own, in the sandbox if there is one, in a cgroup of its own if its type declares limits. */
  private runInOwnProcess(task: RunTask, hooks: RunHooks, { env, deadline, jobType, watches, limits }: JobSettings): Promise<RunOutcome> {
    return this.withOwnProcessSlot(task, limits, async (cgroup, rlimits) => {
      const jobProcess = this.startProcess({ scratchDir: task.scratchDir, env, network: jobType?.network === true, rlimits });
      try {
        await jobProcess.started;
        const startFailure = jobProcess.startFailure;
        if (startFailure) return failed(startFailure);
        if (!jobProcess.usable || jobProcess.pid === undefined) {
          return failed(new TransientError('pool_closed', 'the worker closed its job processes before the job started').toJSON());
        }
        await cgroup?.add(jobProcess.pid);
        return await this.runLimited(jobProcess, () => jobProcess.run(task, env, hooks, deadline), [...cgroupWatch(cgroup), ...watches]);
      } finally {
        jobProcess.retire();
      }
    });
  }

  /**
   * A command job type's program, in a process of its own, wrapped by the same sandbox
   * policy as a Node job process, in a cgroup of its own if its type declares limits.
   */
  private runCommand(task: RunTask, hooks: RunHooks, { env, deadline, watches, limits }: JobSettings, jobType: CommandJobType): Promise<RunOutcome> {
    return this.withOwnProcessSlot(task, limits, async (cgroup, rlimits) => {
      const argv = (await this.loadCommands()).get(jobType.name);
      if (argv === undefined) throw new Error(`job type "${jobType.name}" has no resolved command`);
      // Checked here, as a sandbox would start and only then fail to find it.
      const missing = programProblem(argv[0]!);
      if (missing) return failed(missing);
      const launch = wrapCommand(this.settings.sandbox, {
        argv,
        scratchDir: task.scratchDir,
        readable: [argv[0]!, ...this.jobModuleFolders()],
        env,
        network: jobType.network === true,
        ...(rlimits ? { limits: rlimits } : {}),
      });
      const { progressThrottleMs, abortGraceMs, logger, sandbox } = this.settings;
      const command = new CommandProcess({
        task,
        launch,
        hooks,
        deadline,
        abortGraceMs,
        progressThrottleMs,
        logger,
        signalInside: sandbox.kind === 'bwrap',
        ...(cgroup ? { onSpawn: (pid: number) => cgroup.add(pid) } : {}),
      });
      return this.runLimited(command, () => command.run(), [...cgroupWatch(cgroup), ...watches]);
    });
  }

  /**
   * What every run in a process of its own shares, Node or command: one of the pool's
   * slots, a cgroup when the type declares limits (destroyed after), the scratch folder
   * handed to the job user, and a set-up failure reported as Transient child_start_failed.
   */
  private async withOwnProcessSlot(
    task: RunTask,
    limits: CgroupLimits | undefined,
    run: (cgroup: JobCgroup | undefined, rlimits: ProcessLimits | undefined) => Promise<RunOutcome>,
  ): Promise<RunOutcome> {
    if (this.ownProcessRuns >= this.size) throw this.allBusy(task);
    this.ownProcessRuns += 1;
    let cgroup: JobCgroup | undefined;
    try {
      const plan = limits === undefined ? {} : this.enforcement.plan(limits);
      if (plan.cgroup !== undefined) cgroup = await JobCgroup.create(plan.cgroup);
      await this.handScratchToJobUser(task.scratchDir);
      return await run(cgroup, plan.rlimits);
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      return failed(new TransientError('child_start_failed', `the job's process could not be set up: ${reason}`).toJSON());
    } finally {
      this.ownProcessRuns -= 1;
      await cgroup?.destroy();
    }
  }

  /**
   * Runs a watched process: one that hits a limit (its cgroup's, its scratch reserve) is
   * killed as soon as a watch sees it, and a run that hit one ends Permanent
   * resource_limit, whatever it answered.
   */
  private async runLimited(running: { kill(reason: SerializedError): void }, run: () => Promise<RunOutcome>, watches: LimitWatch[]): Promise<RunOutcome> {
    const timers = watches.map((watch) => {
      let checking = false;
      return setInterval(() => {
        // A slow walk of a big scratch folder must not pile up behind itself.
        if (checking) return;
        checking = true;
        void watch.limit
          .exceeded()
          .then((exceeded) => {
            if (exceeded !== undefined) running.kill(resourceLimit(exceeded));
          })
          .finally(() => (checking = false));
      }, watch.everyMs);
    });
    let outcome: RunOutcome;
    try {
      outcome = await run();
    } finally {
      for (const timer of timers) clearInterval(timer);
    }
    for (const watch of watches) {
      const exceeded = await watch.limit.exceeded();
      if (exceeded !== undefined) return failed(resourceLimit(exceeded));
    }
    return outcome;
  }

  /** The folders of the job-types modules and files: a command's scripts sit there. */
  private jobModuleFolders(): string[] {
    return this.settings.jobModules
      .map(toModuleUrl)
      .flatMap(moduleFiles)
      .map((file) => path.dirname(file));
  }

  private allBusy(task: RunTask): Error {
    return new Error(
      `ProcessPool.run(${task.jobId}): all ${this.size} job processes are busy; ` + "the worker's admission must not start more jobs than the pool has slots",
    );
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

  private loadJobTypes(): Promise<Map<string, JobType>> {
    return (this.jobTypes ??= loadJobTypeRegistry(this.settings.jobModules));
  }

  private loadCommands(): Promise<Map<string, string[]>> {
    return (this.commands ??= this.loadJobTypes().then((jobTypes) => {
      const commandTypes = [...jobTypes.values()].filter(isCommandJobType);
      const searchPath = jobEnvironment(this.settings.jobEnv, tmpdir()).PATH ?? '';
      const folders = this.jobModuleFolders();
      const { kind, jobUser } = this.settings.sandbox;
      const inSandbox = (file: string) => kind !== 'bwrap' || isSystemPath(file) || folders.some((folder) => file.startsWith(folder + path.sep));
      // A folder of PATH the job user cannot enter (the worker's ~/.pyenv) holds no program for its jobs.
      const runnable = (file: string) => jobUser === undefined || spawnSync('test', ['-x', file], { uid: jobUser.uid, gid: jobUser.gid }).status === 0;
      return resolveCommandPrograms(commandTypes, searchPath, (file) => inSandbox(file) && runnable(file));
    }));
  }

  /** The job's environment and deadline, from its type (the parent loads the job modules too; an unknown type is the child's to report). */
  private async jobSettings(task: RunTask): Promise<JobSettings> {
    const jobType = (await this.loadJobTypes().catch(() => undefined))?.get(task.type);
    const env = jobEnvironment([...(jobType?.env ?? []), ...this.settings.jobEnv], task.scratchDir);
    const watches: LimitWatch[] =
      task.scratchReserveBytes === undefined
        ? []
        : [{ limit: await ScratchQuota.start(task.scratchDir, task.scratchReserveBytes, task.scratchStartBytes), everyMs: SCRATCH_WATCH_MS }];
    const timeoutMs =
      task.timeoutSeconds !== undefined
        ? task.timeoutSeconds * 1000
        : jobType?.timeoutSeconds !== undefined
          ? jobType.timeoutSeconds * 1000
          : this.settings.jobTimeoutMs;
    const limits = lowerLimits(jobType?.limits, task.limits);
    if (timeoutMs === undefined) return { env, deadline: undefined, jobType, watches, limits };
    const message = `the job ran past its timeout of ${timeoutMs / 1000} s`;
    const error = jobType?.timeoutClass === 'permanent' ? new PermanentError('timeout', message) : new TransientError('timeout', message);
    return { env, deadline: { ms: timeoutMs, error: error.toJSON() }, jobType, watches, limits };
  }

  /** A job type whose limits this machine cannot hold must not run here as if they were. */
  private checkLimitsEnforceable(jobTypes: JobType[]): void {
    for (const jobType of jobTypes) {
      if (!hasLimits(jobType)) continue;
      try {
        this.enforcement.plan(jobType.limits);
      } catch (error) {
        throw new Error(`job type "${jobType.name}": ${(error as Error).message}`);
      }
    }
  }

  /** With a job user, the scratch folder becomes that user's: the only place its job may write. */
  private async handScratchToJobUser(scratchDir: string): Promise<void> {
    const user = this.settings.sandbox.jobUser;
    if (user) await chown(scratchDir, user.uid, user.gid);
  }

  /** Starts one process the way jobs will get theirs, in an empty scratch folder, and waits until it has loaded the job modules. */
  private async tryOwnProcess(): Promise<void> {
    const scratchDir = await mkdtemp(path.join(this.settings.scratchRoot ?? tmpdir(), 'planrun-sandbox-check-'));
    try {
      await this.handScratchToJobUser(scratchDir);
      await this.checkJobUserWrites(scratchDir);
      const jobProcess = this.startProcess({ scratchDir, env: jobEnvironment(this.settings.jobEnv, scratchDir), network: false });
      await jobProcess.started;
      const failure = jobProcess.startFailure;
      jobProcess.retire();
      await jobProcess.gone;
      if (failure) throw new Error(`${failure.message} (sandbox ${this.settings.sandbox.kind}${this.describeJobUser()})`);
    } finally {
      await rm(scratchDir, { recursive: true, force: true });
    }
  }

  /** A process starts in a folder its user could never reach (it enters it before it drops root), so this is asked of the user itself. */
  private async checkJobUserWrites(scratchDir: string): Promise<void> {
    const user = this.settings.sandbox.jobUser;
    if (!user) return;
    try {
      await execFileAsync('test', ['-w', scratchDir], { uid: user.uid, gid: user.gid });
    } catch {
      throw new Error(
        `job user ${user.label} cannot write in its scratch folders under ${path.dirname(scratchDir)}: ` +
          'every folder above them must be enterable by that user (chmod o+x)',
      );
    }
  }

  private describeJobUser(): string {
    const user = this.settings.sandbox.jobUser;
    return user ? `, job user ${user.label}` : '';
  }

  /**
   * Starts a job process: a pooled one (no `own`) that takes any job, or one of its own for
   * the job whose scratch folder, environment and network `own` gives.
   */
  private startProcess(own?: { scratchDir: string; env: Record<string, string>; network: boolean; rlimits?: ProcessLimits | undefined }): JobProcess {
    const { jobModules, progressThrottleMs, abortGraceMs, maxOldSpaceMb, logger, sandbox } = this.settings;
    const jobModuleUrls = jobModules.map(toModuleUrl);
    const nodeArgv = [
      process.execPath,
      // A clean slate: the parent's inspector or test-runner flags do not belong in a job.
      ...(maxOldSpaceMb === undefined ? [] : [`--max-old-space-size=${maxOldSpaceMb}`]),
      ...this.settings.nodeFlags,
      CHILD_ENTRY,
    ];
    const home = own?.scratchDir ?? tmpdir();
    const launch = own
      ? wrapCommand(sandbox, {
          argv: nodeArgv,
          scratchDir: own.scratchDir,
          readable: [process.execPath, PLANRUN_ROOT, ...moduleReadablePaths(CHILD_ENTRY), ...jobModuleUrls.flatMap(moduleFiles).flatMap(moduleReadablePaths)],
          env: own.env,
          network: own.network,
          ...(own.rlimits ? { limits: own.rlimits } : {}),
        })
      : { file: nodeArgv[0]!, args: nodeArgv.slice(1), env: jobEnvironment(this.settings.jobEnv, home), cwd: home };
    const jobProcess = new JobProcess({
      config: { jobModuleUrls, progressThrottleMs },
      launch,
      abortGraceMs,
      maxOldSpaceMb,
      logger,
      onGone: (gone) => this.replace(gone, own === undefined),
    });
    this.processes.add(jobProcess);
    if (!own) this.idle.push(jobProcess);
    return jobProcess;
  }

  /** A process that exited may still wait in `idle` until everything it said has been read. */
  private takeIdleProcess(): JobProcess | undefined {
    for (let candidate = this.idle.pop(); candidate !== undefined; candidate = this.idle.pop()) {
      if (candidate.usable) return candidate;
    }
    return undefined;
  }

  private replace(gone: JobProcess, pooled: boolean): void {
    this.processes.delete(gone);
    if (!pooled) return;
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

interface JobSettings {
  env: Record<string, string>;
  deadline: RunDeadline | undefined;
  jobType: JobType | undefined;
  /** The lower of its type's and its submission's limits, each; undefined: none (no cgroup). */
  limits: CgroupLimits | undefined;
  /** The limits watched beside its cgroup's: its scratch reserve. */
  watches: LimitWatch[];
}

/** A limit checked every `everyMs` while a job runs, and once more when it ends. */
interface LimitWatch {
  limit: { exceeded(): Promise<string | undefined> };
  everyMs: number;
}

function cgroupWatch(cgroup: JobCgroup | undefined): LimitWatch[] {
  return cgroup ? [{ limit: cgroup, everyMs: LIMIT_WATCH_MS }] : [];
}

// How often a job with limits is checked for having hit one (a fork bomb is stopped by the limit at once; this ends its job).
const LIMIT_WATCH_MS = 100;
// How often a job's scratch folder is measured against its reserve: a walk of the folder, so less often.
const SCRATCH_WATCH_MS = 200;

function hasLimits(jobType: JobType | undefined): jobType is JobType & { limits: CgroupLimits } {
  return jobType?.limits !== undefined && Object.values(jobType.limits).some((limit) => limit !== undefined);
}

/** Each limit the lower of the job type's and the submission's: a submission can tighten its type's limits, never loosen them. */
function lowerLimits(ofType: CgroupLimits | undefined, ofSubmission: CgroupLimits | undefined): CgroupLimits | undefined {
  const lower = (a: number | undefined, b: number | undefined) => (a === undefined ? b : b === undefined ? a : Math.min(a, b));
  const memoryMb = lower(ofType?.memoryMb, ofSubmission?.memoryMb);
  const processes = lower(ofType?.processes, ofSubmission?.processes);
  if (memoryMb === undefined && processes === undefined) return undefined;
  return { ...(memoryMb === undefined ? {} : { memoryMb }), ...(processes === undefined ? {} : { processes }) };
}

function resourceLimit(exceeded: string): SerializedError {
  // The same job would hit the same limit on every attempt.
  return new PermanentError('resource_limit', `the job was stopped: ${exceeded}`).toJSON();
}

/** A program found at start that is gone or no longer executable: the worker is set up wrong, so Fatal. */
function programProblem(program: string): SerializedError | undefined {
  try {
    accessSync(program, constants.X_OK);
    return undefined;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOENT'
      ? new FatalError('command_not_found', `the job's program ${program} is not there`).toJSON()
      : new FatalError('command_not_executable', `the job's program ${program} is not executable`).toJSON();
  }
}

/** The file behind a job module's URL: a `data:` module needs none. */
function moduleFiles(url: string): string[] {
  return url.startsWith('file:') ? [fileURLToPath(url)] : [];
}

type Settings = Required<Omit<ProcessPoolOptions, 'maxOldSpaceMb' | 'logger' | 'jobTimeoutMs' | 'scratchRoot'>> &
  Pick<ProcessPoolOptions, 'maxOldSpaceMb' | 'logger' | 'jobTimeoutMs' | 'scratchRoot'>;

function validateOptions(options: ProcessPoolOptions): Settings {
  const settings: Settings = {
    jobModules: options.jobModules,
    size: options.size,
    progressThrottleMs: options.progressThrottleMs ?? DEFAULT_PROGRESS_THROTTLE_MS,
    abortGraceMs: options.abortGraceMs ?? DEFAULT_ABORT_GRACE_MS,
    maxOldSpaceMb: options.maxOldSpaceMb,
    logger: options.logger,
    sandbox: options.sandbox ?? { kind: 'none' },
    jobEnv: options.jobEnv ?? [],
    jobTimeoutMs: options.jobTimeoutMs,
    scratchRoot: options.scratchRoot,
    limitsBy: options.limitsBy ?? 'auto',
    nodeFlags: options.nodeFlags ?? [],
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
  if (settings.jobTimeoutMs !== undefined && (!isWholeNumber(settings.jobTimeoutMs) || settings.jobTimeoutMs < 1)) {
    problems.push(`jobTimeoutMs must be a whole number >= 1, got ${settings.jobTimeoutMs}`);
  }
  if (!Array.isArray(settings.nodeFlags) || !settings.nodeFlags.every((flag) => typeof flag === 'string' && flag !== '')) {
    problems.push('nodeFlags must be a list of non-empty strings');
  }
  for (const name of settings.jobEnv) {
    const problem = envNameProblem(name);
    if (problem !== undefined) problems.push(`jobEnv: ${problem}`);
  }
  if (problems.length > 0) throw new RangeError(`invalid ProcessPool options: ${problems.join('; ')}`);
  return settings;
}

function isWholeNumber(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}
