import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { FatalError, PermanentError, TransientError, serializeError, type SerializedError } from '../../core/errors.js';
import { describeDeath, type ChildDeath } from './child-death.js';
import { ChildOutput } from './child-output.js';
import type { RunnerLogger } from './logger.js';
import { isChildMessage, type ChildConfig, type ChildMessage, type ParentMessage, type RunTask } from './protocol.js';
import { failed, type RunOutcome } from './run-outcome.js';
import type { WrappedSpawn } from './sandbox.js';

/** The script a job process runs: `node [flags] CHILD_ENTRY <config JSON>`. */
export const CHILD_ENTRY = fileURLToPath(new URL('./child.js', import.meta.url));
// After the exit, what the process last printed or sent (V8's out-of-memory note, its
// 'crashing' message) may still be in the pipes; wait at most this long for it.
const DRAIN_AFTER_EXIT_MS = 250;

export interface RunHooks {
  onProgress(fraction: number, message?: string): void;
  /** Each line the job's process printed (stdout, stderr) and each `ctx.log()` of its code. */
  onLog?(stream: 'stdout' | 'stderr' | 'log', message: string, fields?: Record<string, unknown>): void;
  signal?: AbortSignal;
}

/** A deadline for one run: past it the job is aborted, then killed after the abort grace, and ends with `error`. */
export interface RunDeadline {
  ms: number;
  error: SerializedError;
}

export interface JobProcessOptions {
  config: ChildConfig;
  /** How to start the process (the sandbox's wrapping of `node CHILD_ENTRY`); the config is appended to its args. */
  launch: WrappedSpawn;
  abortGraceMs: number;
  maxOldSpaceMb: number | undefined;
  logger: RunnerLogger | undefined;
  /**
   * Called once the process is gone and everything it said has been read (so `startFailure`
   * is final), before the outcome of the job it was running is settled: whoever gets that
   * outcome and starts another job finds the pool already mended.
   */
  onGone(process: JobProcess): void;
}

interface ActiveRun {
  runId: number;
  task: RunTask;
  hooks: RunHooks;
  /** Set once the run's deadline passed: a failure after it is reported as this. */
  timedOut?: SerializedError;
  finish(outcome: RunOutcome): void;
}

/**
 * One job process (spawned as the sandbox wraps it, with a Node IPC channel): runs one job
 * at a time in it, forwards its progress, enforces its deadline and the abort grace
 * period, and turns its death into the outcome of the job it was running.
 */
export class JobProcess {
  /** Resolves once the process has loaded the job modules, or is gone, whichever comes first. */
  readonly started: Promise<void>;
  /** Resolves once the process is gone and everything it said before dying has been read. */
  readonly gone: Promise<void>;
  private readonly child: ChildProcess;
  private readonly output: ChildOutput;
  private active: ActiveRun | undefined;
  /**
   * The hooks of the run that started last, kept after it ends: a line the job printed just
   * before it returned may be read after its result arrived (a pipe and the IPC channel are
   * read in no set order), and is still that run's. The next run takes over.
   */
  private lastHooks: RunHooks | undefined;
  private lastRunId = 0;
  private graceTimer: NodeJS.Timeout | undefined;
  private isReady = false;
  private markReady!: () => void;
  private exit: { code: number | null; signal: NodeJS.Signals | null; spawnError?: Error } | undefined;
  /** Why we killed it, when we did: that, rather than "killed by SIGKILL", is the run's outcome. */
  private killReason: SerializedError | undefined;
  private crashMessage: string | undefined;
  private loadFailure: string | undefined;

  constructor(private readonly options: JobProcessOptions) {
    const { launch } = options;
    this.child = spawn(launch.file, [...launch.args, JSON.stringify(options.config)], {
      env: launch.env,
      cwd: launch.cwd,
      ...(launch.uid === undefined ? {} : { uid: launch.uid }),
      ...(launch.gid === undefined ? {} : { gid: launch.gid }),
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      serialization: 'json',
    });
    this.output = new ChildOutput(
      this.child,
      options.logger,
      () => this.active?.task.jobId,
      (stream, line) => this.lastHooks?.onLog?.(stream, line),
    );
    const disconnected = once(this.child, 'disconnect').then(
      () => undefined,
      () => undefined,
    );
    const exited = new Promise<void>((resolve) => {
      this.child.on('exit', (code, signal) => {
        this.handleExit({ code, signal });
        resolve();
      });
      this.child.on('error', (error) => {
        if (this.child.pid !== undefined) {
          options.logger?.warn({ pid: this.child.pid, err: error }, 'job process error');
          return;
        }
        // Without a pid it never started, and no 'exit' will follow.
        this.handleExit({ code: null, signal: null, spawnError: error });
        resolve();
      });
    });
    this.gone = exited.then(async () => {
      await Promise.race([Promise.all([this.output.ended, disconnected]), delay(DRAIN_AFTER_EXIT_MS)]);
      this.settleAfterDeath();
    });
    this.started = new Promise<void>((resolve) => {
      this.markReady = resolve;
      void this.gone.then(resolve);
    });
    this.child.on('message', (message: unknown) => {
      if (isChildMessage(message)) this.handle(message);
    });
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** False once the process exited or was told to die: it must not be given another job. */
  get usable(): boolean {
    return this.exit === undefined && this.killReason === undefined;
  }

  /**
   * Why the process died before it was ready (job modules that do not load, a node that
   * does not start), if it did: the worker itself is broken then, so this is fatal.
   */
  get startFailure(): SerializedError | undefined {
    if (this.loadFailure !== undefined) {
      return new FatalError('job_modules_failed', `the job processes cannot load their job modules: ${this.loadFailure}`).toJSON();
    }
    if (this.exit === undefined || this.isReady || this.killReason !== undefined) return undefined;
    const why = this.exit.spawnError?.message ?? describeDeath(this.death()).message;
    return new FatalError('child_start_failed', `a job process did not start: ${why}`).toJSON();
  }

  /** Runs one job; `env` replaces the process's environment for it (see child.ts). */
  run(task: RunTask, env: Record<string, string>, hooks: RunHooks, deadline?: RunDeadline): Promise<RunOutcome> {
    if (this.active || !this.usable) throw new Error(`job process ${this.pid} cannot take job ${task.jobId}: it is busy or gone`);
    const runId = ++this.lastRunId;
    return new Promise<RunOutcome>((resolve) => {
      const onAbort = () => this.abort(runId);
      let deadlineTimer: NodeJS.Timeout | undefined;
      const run: ActiveRun = {
        runId,
        task,
        hooks,
        finish: (outcome) => {
          this.active = undefined;
          clearTimeout(this.graceTimer);
          this.graceTimer = undefined;
          clearTimeout(deadlineTimer);
          hooks.signal?.removeEventListener('abort', onAbort);
          // Whatever the job made of its abort signal, a failure after the deadline is the deadline's.
          resolve(run.timedOut && !outcome.ok ? failed(run.timedOut) : outcome);
        },
      };
      this.active = run;
      this.lastHooks = hooks;
      hooks.signal?.addEventListener('abort', onAbort, { once: true });
      if (deadline) {
        deadlineTimer = setTimeout(() => {
          run.timedOut = deadline.error;
          this.abort(runId);
        }, deadline.ms);
      }
      this.handOver(runId, task, env);
    });
  }

  /**
   * Sends the job to the process. Whatever keeps it from getting there fails the job as
   * Permanent `invalid_input` (issue 18: a job that cannot be handed over must never hold
   * its slot): input the channel cannot serialise (JSON.stringify throws on a value
   * nested thousands of levels deep) ends the run at once, and the process, which got
   * nothing, takes the next job; a send the channel fails afterwards leaves the process in
   * doubt, so it is killed and replaced, and the job ends with that reason.
   */
  private handOver(runId: number, task: RunTask, env: Record<string, string>): void {
    const cannotHandOver = (error: unknown) =>
      new PermanentError('invalid_input', `the job could not be handed to its job process: ${error instanceof Error ? error.message : String(error)}`).toJSON();
    try {
      this.child.send({ kind: 'run', runId, task, env } satisfies ParentMessage, (error) => {
        if (error && this.active?.runId === runId) this.kill(cannotHandOver(error));
      });
    } catch (error) {
      if (this.active?.runId === runId) this.active.finish(failed(cannotHandOver(error)));
    }
  }

  /** A process started for one job: that job is over (or never came), so the process goes. */
  retire(): void {
    if (this.exit === undefined) this.kill(new TransientError('pool_closed', 'the job process was retired while running a job').toJSON());
  }

  /** Kills the process at once; a job it was running ends with `reason`. */
  kill(reason: SerializedError): void {
    this.killReason ??= reason;
    this.child.kill('SIGKILL');
  }

  private abort(runId: number): void {
    // Aborted twice (its deadline, then its lease): the first grace period stands.
    if (this.active?.runId !== runId || this.graceTimer !== undefined) return;
    this.send({ kind: 'abort', runId });
    const graceMs = this.options.abortGraceMs;
    this.graceTimer = setTimeout(() => {
      const run = this.active;
      if (run?.runId !== runId) return;
      const message = `the job was aborted and did not stop within ${graceMs} ms, so its process was killed`;
      this.kill(run.timedOut ?? new TransientError('aborted', message).toJSON());
    }, graceMs);
  }

  private handle(message: ChildMessage): void {
    const run = this.active;
    switch (message.kind) {
      case 'ready':
        this.isReady = true;
        this.markReady();
        return;
      case 'load_failed':
        this.loadFailure = message.message;
        return;
      case 'crashing':
        this.crashMessage = message.message;
        return;
      case 'progress':
        if (run?.runId === message.runId) this.reportProgress(run, message.fraction, message.message);
        return;
      case 'log':
        if (run?.runId === message.runId) run.hooks.onLog?.('log', message.message, message.fields);
        return;
      case 'result':
        if (run?.runId !== message.runId) return;
        // The error was built in a process running job code: normalise it rather than trust it.
        run.finish(message.outcome.ok ? message.outcome : failed(serializeError(message.outcome.error)));
        return;
    }
  }

  private reportProgress(run: ActiveRun, fraction: number, message: string | undefined): void {
    try {
      run.hooks.onProgress(fraction, message);
    } catch (error) {
      this.options.logger?.error({ jobId: run.task.jobId, err: error }, 'the onProgress hook threw; progress report dropped');
    }
  }

  private handleExit(exit: NonNullable<JobProcess['exit']>): void {
    if (this.exit !== undefined) return;
    this.exit = exit;
    clearTimeout(this.graceTimer);
  }

  private settleAfterDeath(): void {
    this.options.onGone(this);
    this.active?.finish(failed(this.killReason ?? this.startFailure ?? describeDeath(this.death())));
  }

  private death(): ChildDeath {
    return {
      exitCode: this.exit?.code ?? null,
      signal: this.exit?.signal ?? null,
      crashMessage: this.crashMessage,
      stderrTail: this.output.stderrTail(),
      maxOldSpaceMb: this.options.maxOldSpaceMb,
    };
  }

  private send(message: ParentMessage): void {
    // A failed send means the process is dying; its exit settles the run.
    this.child.send(message, (error) => {
      if (error) this.options.logger?.warn({ pid: this.pid, err: error }, 'could not send to the job process');
    });
  }
}
