import { spawn, type ChildProcess } from 'node:child_process';
import { constants, readFileSync, readdirSync } from 'node:fs';
import { lstat, open, readdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as delay } from 'node:timers/promises';
import type { Readable, Writable } from 'node:stream';
import { FatalError, PermanentError, TransientError, UNCLASSIFIED_CODE, type SerializedError } from '../../core/errors.js';
import { ChildOutput } from './child-output.js';
import type { RunDeadline, RunHooks } from './job-process.js';
import { PROTOCOL_ENV } from './job-env.js';
import type { RunnerLogger } from './logger.js';
import { ProgressThrottle } from './progress-throttle.js';
import type { RunTask } from './protocol.js';
import { failed, outcomeOfReturnedValue, type RunOutcome } from './run-outcome.js';
import type { WrappedSpawn } from './sandbox.js';

/**
 * One run of a command job type: a program of any language speaking docs/job-protocol.md.
 * It gets its input in a file and on stdin, reports progress as lines on fd 3, names its
 * outputs in a result file (or leaves them in `outputs/`), and says how it failed with a
 * sysexits exit code.
 */

/** The file descriptor progress lines are written to. */
export const PROGRESS_FD = 3;
/** In the scratch folder; the job's own files, so they are named out of the way of its outputs. */
export const INPUT_FILE_NAME = '.planrun-input.json';
export const RESULT_FILE_NAME = '.planrun-result.json';
/** Without a result file, every file under this folder of scratch is an output. */
export const OUTPUTS_FOLDER = 'outputs';

// With a cgroup, the command must not run (nor fork) before it is in it: a shell holds it
// until the worker writes a line to fd 4, then closes fd 4 and becomes the command.
const HOLD_SHELL = '/bin/sh';
const HOLD_FD = 4;
const HOLD_ARGS = ['-c', `read -r _ <&${HOLD_FD}; exec ${HOLD_FD}<&-; exec "$@"`, 'planrun-held'];

// sysexits.h: the exit codes that say what kind of failure it was.
const EX_DATAERR = 65;
const EX_SOFTWARE = 70;
const EX_TEMPFAIL = 75;

// A result is data for the ledger, not a file to store: anything larger belongs in an output.
const MAX_RESULT_FILE_BYTES = 1024 * 1024;
const STDERR_LINES_IN_MESSAGE = 10;
const DRAIN_AFTER_EXIT_MS = 250;
const MAX_PROGRESS_LINE_CHARS = 4096;
// A job printing garbage on fd 3 in a loop must not flood the log.
const MAX_PROGRESS_WARNINGS = 5;
const PROGRESS_LINE = /^progress\s+(\S+)(?:\s+(.*))?$/;

export interface CommandRunOptions {
  task: RunTask;
  /** What to spawn (the sandbox's wrapping of the command); its env gets the protocol's names added. */
  launch: WrappedSpawn;
  hooks: RunHooks;
  deadline: RunDeadline | undefined;
  abortGraceMs: number;
  progressThrottleMs: number;
  /**
   * The spawned process is bubblewrap, which dies of SIGTERM and takes the job down with
   * SIGKILL: the abort signal goes to the processes inside it instead.
   */
  signalInside: boolean;
  logger: RunnerLogger | undefined;
  /**
   * Called with the pid as soon as the process exists, before the command runs (to put it in
   * the job's cgroup): until it resolves the process is a shell waiting on fd 4.
   */
  onSpawn?(pid: number): Promise<void>;
}

/** The input file a command job reads, written before it starts. */
export async function writeInputFile(scratchDir: string, input: unknown): Promise<string> {
  const file = path.join(scratchDir, INPUT_FILE_NAME);
  await writeFile(file, JSON.stringify(input), { mode: 0o644 });
  return file;
}

export class CommandProcess {
  private child: ChildProcess | undefined;
  private killReason: SerializedError | undefined;
  private graceTimer: NodeJS.Timeout | undefined;
  private progressWarnings = 0;
  /** Set once the run's deadline passed: a failure after it is reported as this. */
  private timedOut: SerializedError | undefined;
  private aborted = false;

  constructor(private readonly options: CommandRunOptions) {}

  /** Kills the process at once; the run ends with `reason`. */
  kill(reason: SerializedError): void {
    this.killReason ??= reason;
    this.child?.kill('SIGKILL');
  }

  /** Runs the command to its end; never rejects for anything the command does. */
  async run(): Promise<RunOutcome> {
    const { task, launch, hooks, deadline } = this.options;
    const inputFile = await writeInputFile(task.scratchDir, task.input);
    const resultFile = path.join(task.scratchDir, RESULT_FILE_NAME);
    await rm(resultFile, { force: true });
    const env = {
      ...launch.env,
      [PROTOCOL_ENV.inputFile]: inputFile,
      [PROTOCOL_ENV.resultFile]: resultFile,
      [PROTOCOL_ENV.progressFd]: String(PROGRESS_FD),
    };
    const held = this.options.onSpawn !== undefined;
    const [file, args] = held ? [HOLD_SHELL, [...HOLD_ARGS, launch.file, ...launch.args]] : [launch.file, launch.args];
    const child = spawn(file, args, {
      env,
      cwd: launch.cwd,
      ...(launch.uid === undefined ? {} : { uid: launch.uid }),
      ...(launch.gid === undefined ? {} : { gid: launch.gid }),
      stdio: held ? ['pipe', 'pipe', 'pipe', 'pipe', 'pipe'] : ['pipe', 'pipe', 'pipe', 'pipe'],
    });
    this.child = child;
    const output = new ChildOutput(
      child,
      this.options.logger,
      () => task.jobId,
      (stream, line) => hooks.onLog?.(stream, line),
    );
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; spawnError?: NodeJS.ErrnoException }>((resolve) => {
      child.on('error', (error: NodeJS.ErrnoException) => {
        if (child.pid === undefined) resolve({ code: null, signal: null, spawnError: error });
      });
      child.on('exit', (code, signal) => resolve({ code, signal }));
    });
    const throttle = new ProgressThrottle(this.options.progressThrottleMs, (report) => this.reportProgress(report.fraction, report.message));
    this.readProgress(child.stdio[PROGRESS_FD] as Readable, throttle);
    this.feedInput(child, JSON.stringify(task.input));

    const onAbort = () => this.abort();
    hooks.signal?.addEventListener('abort', onAbort, { once: true });
    const deadlineTimer = deadline
      ? setTimeout(() => {
          this.timedOut = deadline.error;
          this.abort();
        }, deadline.ms)
      : undefined;
    if (held && child.pid !== undefined) await this.release(child, child.pid);
    try {
      const exit = await exited;
      // A process the program left running may hold its pipes open: what is already written is read, no more is awaited.
      await Promise.race([output.ended, delay(DRAIN_AFTER_EXIT_MS)]);
      throttle.close();
      if (exit.spawnError) return failed(cannotStart(launch.file, exit.spawnError));
      if (this.killReason) return failed(this.killReason);
      if (exit.code === 0) return await readResult(task.scratchDir, resultFile);
      if (this.timedOut) return failed(this.timedOut);
      if (this.aborted) return failed(new TransientError('aborted', `the job stopped on its abort signal (${describeExit(exit.code, exit.signal)})`).toJSON());
      return failed(exitError(exit.code, exit.signal, output.stderrTail()));
    } finally {
      throttle.close();
      clearTimeout(deadlineTimer);
      clearTimeout(this.graceTimer);
      hooks.signal?.removeEventListener('abort', onAbort);
    }
  }

  /** Once `onSpawn` is done with the held process (it is in the job's cgroup), lets it exec the command. */
  private async release(child: ChildProcess, pid: number): Promise<void> {
    const go = child.stdio[HOLD_FD] as Writable;
    go.on('error', () => undefined);
    try {
      await this.options.onSpawn!(pid);
      go.end('go\n');
    } catch (error) {
      this.kill(setupFailed(error));
    }
  }

  /** The abort signal: SIGTERM, then SIGKILL once the grace period is over. */
  private abort(): void {
    const child = this.child;
    if (child?.pid === undefined || this.graceTimer !== undefined || child.exitCode !== null || child.signalCode !== null) return;
    this.aborted = true;
    const pids = this.options.signalInside ? descendantsOf(child.pid) : [child.pid];
    for (const pid of pids) signal(pid, 'SIGTERM');
    const graceMs = this.options.abortGraceMs;
    this.graceTimer = setTimeout(() => {
      const message = `the job was aborted and did not stop within ${graceMs} ms, so its process was killed`;
      this.kill(this.timedOut ?? new TransientError('aborted', message).toJSON());
    }, graceMs);
  }

  /** The input on stdin too; a program that never reads it may close it, which is no failure. */
  private feedInput(child: ChildProcess, input: string): void {
    child.stdin?.on('error', () => undefined);
    child.stdin?.end(input);
  }

  private readProgress(stream: Readable, throttle: ProgressThrottle): void {
    createInterface({ input: stream, crlfDelay: Infinity }).on('line', (line) => {
      const report = parseProgressLine(line);
      if (report) throttle.report(report);
      else this.warnMalformed(line);
    });
  }

  private warnMalformed(line: string): void {
    this.progressWarnings += 1;
    if (this.progressWarnings > MAX_PROGRESS_WARNINGS) return;
    const shown = line.length > 200 ? `${line.slice(0, 200)}...` : line;
    const more = this.progressWarnings === MAX_PROGRESS_WARNINGS ? ' (later ones are not logged)' : '';
    this.options.logger?.warn(
      { jobId: this.options.task.jobId, line: shown },
      `ignored a progress line that is not "progress <fraction 0..1> [message]"${more}`,
    );
  }

  private reportProgress(fraction: number, message: string | undefined): void {
    try {
      this.options.hooks.onProgress(fraction, message);
    } catch (error) {
      this.options.logger?.error({ jobId: this.options.task.jobId, err: error }, 'the onProgress hook threw; progress report dropped');
    }
  }
}

/** `progress 0.42 encoding pass 2`: the fraction (clamped to 0..1) and an optional message. */
export function parseProgressLine(line: string): { fraction: number; message?: string } | undefined {
  if (line.length > MAX_PROGRESS_LINE_CHARS) return undefined;
  const match = PROGRESS_LINE.exec(line.trim());
  if (!match) return undefined;
  const fraction = Number(match[1]);
  if (!Number.isFinite(fraction)) return undefined;
  const message = match[2]?.trim();
  return { fraction: Math.min(1, Math.max(0, fraction)), ...(message ? { message } : {}) };
}

/** The outcome of a run that exited 0: its result file, else the files it left in `outputs/`. */
async function readResult(scratchDir: string, resultFile: string): Promise<RunOutcome> {
  const text = await readResultFile(resultFile);
  if (typeof text !== 'string') {
    if (text.ok === false) return text;
    const outputs = await listOutputsFolder(scratchDir);
    return { ok: true, result: outputs.length > 0 ? { outputs } : {} };
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    return invalidResult(`${RESULT_FILE_NAME} is not JSON: ${error instanceof Error ? error.message : String(error)}`);
  }
  return outcomeOfReturnedValue(parsed, `the result file ${RESULT_FILE_NAME} holds`);
}

/**
 * The result file's text, read without following a link the job may have put there, so a
 * job cannot make the worker read a file it could not read itself. `{ ok: true }` when
 * there is none.
 */
async function readResultFile(resultFile: string): Promise<string | RunOutcome> {
  let handle;
  try {
    handle = await open(resultFile, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return { ok: true, result: {} };
    if (code === 'ELOOP') return invalidResult(`${RESULT_FILE_NAME} is a symbolic link, not a file`);
    throw error;
  }
  try {
    const stats = await handle.stat();
    if (!stats.isFile()) return invalidResult(`${RESULT_FILE_NAME} is not a regular file`);
    if (stats.nlink !== 1) return invalidResult(`${RESULT_FILE_NAME} is a hard link to another file`);
    if (stats.size > MAX_RESULT_FILE_BYTES) {
      return invalidResult(`${RESULT_FILE_NAME} holds ${stats.size} bytes, more than ${MAX_RESULT_FILE_BYTES}: large results belong in an output file`);
    }
    return await handle.readFile('utf8');
  } finally {
    await handle.close();
  }
}

/** Every file under `outputs/` (links too: the output check refuses them by name), in a stable order. */
async function listOutputsFolder(scratchDir: string): Promise<string[]> {
  const root = path.join(scratchDir, OUTPUTS_FOLDER);
  const stats = await lstat(root).catch(() => undefined);
  if (!stats?.isDirectory()) return [];
  const found: string[] = [];
  const walk = async (relative: string): Promise<void> => {
    for (const entry of await readdir(path.join(scratchDir, relative), { withFileTypes: true })) {
      const name = path.join(relative, entry.name);
      if (entry.isDirectory()) await walk(name);
      else found.push(name);
    }
  };
  await walk(OUTPUTS_FOLDER);
  return found.sort();
}

function describeExit(code: number | null, signalName: NodeJS.Signals | null): string {
  return signalName !== null ? `killed by ${signalName}` : `exit code ${code}`;
}

function exitError(code: number | null, signalName: NodeJS.Signals | null, stderrTail: string): SerializedError {
  const lastLines = stderrTail.trimEnd().split('\n').slice(-STDERR_LINES_IN_MESSAGE).join('\n');
  const said = lastLines === '' ? ' (its stderr is empty)' : `: ${lastLines}`;
  if (signalName !== null) return new TransientError(UNCLASSIFIED_CODE, `the job's program was killed by ${signalName}${said}`).toJSON();
  switch (code) {
    case EX_DATAERR:
      return new PermanentError('data_error', `the job's program exited with 65 (EX_DATAERR)${said}`).toJSON();
    case EX_TEMPFAIL:
      return new TransientError('temporary_failure', `the job's program exited with 75 (EX_TEMPFAIL)${said}`).toJSON();
    case EX_SOFTWARE:
      return new FatalError('software_error', `the job's program exited with 70 (EX_SOFTWARE)${said}`).toJSON();
    default:
      return new TransientError(UNCLASSIFIED_CODE, `the job's program exited with ${code}${said}`).toJSON();
  }
}

/** A program that cannot be started means this worker is set up wrong: no attempt here can succeed. */
function cannotStart(file: string, error: NodeJS.ErrnoException): SerializedError {
  if (error.code === 'ENOENT') return new FatalError('command_not_found', `the job's program ${file} is not there`).toJSON();
  if (error.code === 'EACCES') return new FatalError('command_not_executable', `the job's program ${file} is not executable`).toJSON();
  return new FatalError('child_start_failed', `the job's program ${file} did not start: ${error.message}`).toJSON();
}

function setupFailed(error: unknown): SerializedError {
  const reason = error instanceof Error ? error.message : String(error);
  return new TransientError('child_start_failed', `the job's process could not be set up: ${reason}`).toJSON();
}

function invalidResult(message: string): RunOutcome {
  return failed(new PermanentError('invalid_result', message).toJSON());
}

/** Every process below `pid`, from /proc (children files need Linux 3.5 or later). */
function descendantsOf(pid: number): number[] {
  const found: number[] = [];
  const visit = (parent: number): void => {
    let tasks: string[];
    try {
      tasks = readdirSync(`/proc/${parent}/task`);
    } catch {
      return;
    }
    for (const task of tasks) {
      let children: string;
      try {
        children = readFileSync(`/proc/${parent}/task/${task}/children`, 'utf8');
      } catch {
        continue;
      }
      for (const child of children.split(' ').filter(Boolean).map(Number)) {
        found.push(child);
        visit(child);
      }
    }
  };
  visit(pid);
  return found;
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // Gone already: nothing left to stop.
  }
}
