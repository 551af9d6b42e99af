/**
 * Keeps one planrun process (the orchestrator, or one worker) running as an operator's
 * supervisor would: starts it from the built CLI, restarts it whenever it exits (after
 * the nemesis's downtime when the nemesis killed it; soon after a crash, a Fatal exit or a
 * start that failed because the broker was down), and records each start, readiness and
 * exit in the history. Its output goes to a log file of its own.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, type WriteStream } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { fatalExitCode } from '../../src/worker/exit-codes.js';
import type { HistoryWriter } from './history.js';

export interface ProcessSpec {
  role: 'orchestrator' | 'worker';
  name: string;
  cli: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  /** The log line that says it is ready (`"msg":"worker ready"`). */
  readyText: string;
  logFile: string;
}

export class Supervised {
  private child: ChildProcess | undefined;
  private isReady = false;
  private shuttingDown = false;
  /** Set when the nemesis kills the process: it comes back after this long. */
  private nemesisDownMs: number | undefined;
  private startFailures = 0;
  private restartTimer: NodeJS.Timeout | undefined;
  private readonly log: WriteStream;
  private readonly readyWaiters = new Set<() => void>();
  private exited: Promise<void> = Promise.resolve();
  starts = 0;

  constructor(
    readonly spec: ProcessSpec,
    private readonly history: HistoryWriter,
  ) {
    this.log = createWriteStream(spec.logFile, { flags: 'a' });
  }

  get name(): string {
    return this.spec.name;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get ready(): boolean {
    return this.isReady;
  }

  start(): void {
    if (this.shuttingDown) return;
    const { spec } = this;
    const child = spawn(process.execPath, [spec.cli, ...spec.args], { env: spec.env, stdio: ['ignore', 'pipe', 'pipe'] });
    this.child = child;
    this.isReady = false;
    this.starts++;
    const pid = child.pid ?? -1;
    this.history.record({ kind: 'proc_start', role: spec.role, name: spec.name, child: pid });
    let tail = '';
    const onOutput = (chunk: Buffer) => {
      this.log.write(chunk);
      if (this.isReady || this.child !== child) return;
      tail = (tail + chunk.toString('utf8')).slice(-4096);
      if (tail.includes(spec.readyText)) {
        this.isReady = true;
        this.startFailures = 0;
        this.history.record({ kind: 'proc_ready', role: spec.role, name: spec.name, child: pid });
        for (const wake of this.readyWaiters) wake();
        this.readyWaiters.clear();
      }
    };
    child.stdout.on('data', onOutput);
    child.stderr.on('data', onOutput);
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        this.onExit(child, code, signal, tail);
        resolve();
      });
    });
  }

  private onExit(child: ChildProcess, code: number | null, signal: NodeJS.Signals | null, tail: string): void {
    if (this.child !== child) return;
    const wasReady = this.isReady;
    this.isReady = false;
    this.child = undefined;
    const { role, name } = this.spec;
    let cause: 'nemesis' | 'shutdown' | 'start_failed' | 'unexpected';
    let restartInMs: number;
    if (this.shuttingDown) {
      cause = 'shutdown';
      restartInMs = -1;
    } else if (this.nemesisDownMs !== undefined) {
      cause = 'nemesis';
      restartInMs = this.nemesisDownMs;
      this.nemesisDownMs = undefined;
    } else if (!wasReady) {
      cause = 'start_failed';
      restartInMs = Math.min(3000, 300 * 2 ** this.startFailures++);
    } else {
      cause = 'unexpected';
      restartInMs = 300;
    }
    this.history.record({
      kind: 'proc_exit',
      role,
      name,
      child: child.pid ?? -1,
      code,
      signal,
      cause,
      ready: wasReady,
      ...(cause === 'unexpected' && code !== fatalExitCode ? { tail: lastLines(tail, 8) } : {}),
    });
    this.log.write(`\n=== [chaos] ${name} pid ${child.pid} exited (code ${code}, signal ${signal}, ${cause}) ===\n`);
    if (restartInMs >= 0) {
      this.restartTimer = setTimeout(() => {
        this.restartTimer = undefined;
        this.start();
      }, restartInMs);
    }
  }

  /** Resolves once the process is ready (now, or after its next start). */
  async waitReady(timeoutMs: number): Promise<boolean> {
    if (this.isReady) return true;
    let wake: () => void = () => undefined;
    const ready = new Promise<void>((resolve) => {
      wake = resolve;
      this.readyWaiters.add(resolve);
    });
    const timer = delay(timeoutMs).then(() => false);
    const result = await Promise.race([ready.then(() => true), timer]);
    this.readyWaiters.delete(wake);
    return result;
  }

  /** SIGKILL now; the supervisor starts it again `downMs` later. */
  kill(downMs: number): boolean {
    const child = this.child;
    if (!child?.pid) return false;
    this.nemesisDownMs = downMs;
    child.kill('SIGKILL');
    return true;
  }

  /** SIGSTOP (the process alone: its job processes keep running) or SIGCONT. */
  signal(signal: 'SIGSTOP' | 'SIGCONT'): boolean {
    const child = this.child;
    if (!child?.pid) return false;
    return child.kill(signal);
  }

  /** SIGTERM and wait (SIGKILL after `graceMs`); no restart. */
  async shutdown(graceMs: number): Promise<void> {
    this.shuttingDown = true;
    clearTimeout(this.restartTimer);
    const child = this.child;
    if (child) {
      child.kill('SIGCONT');
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await this.exited;
      clearTimeout(killer);
    }
    await new Promise<void>((resolve) => this.log.end(resolve));
  }

  /** SIGKILL without a restart: for a run that is being torn down after a failure. */
  killForGood(): void {
    this.shuttingDown = true;
    clearTimeout(this.restartTimer);
    this.child?.kill('SIGKILL');
  }
}

function lastLines(text: string, n: number): string {
  return text.trim().split('\n').slice(-n).join('\n').slice(-2000);
}
