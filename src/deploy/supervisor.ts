import { spawn, type ChildProcess } from 'node:child_process';
import type { Logger } from 'pino';

export interface SupervisedProcess {
  name: string;
  args: string[];
  env?: NodeJS.ProcessEnv;
}

export interface SupervisorOptions {
  logger: Logger;
  /** First restart delay; doubles on each quick exit, up to `maxRestartDelayMs`. */
  restartDelayMs?: number;
  maxRestartDelayMs?: number;
  /** A process that ran this long before exiting is restarted at the first delay again. */
  healthyAfterMs?: number;
  /** How long `stop` waits after SIGTERM before SIGKILL. */
  stopGraceMs?: number;
  /** After `hurry`, how long before SIGKILL. */
  hurryGraceMs?: number;
}

interface Running {
  spec: SupervisedProcess;
  child: ChildProcess | undefined;
  startedAt: number;
  delayMs: number;
  restartTimer: NodeJS.Timeout | undefined;
  restarts: number;
  /** While stopping: the SIGKILL to come. */
  killer: NodeJS.Timeout | undefined;
}

/**
 * Keeps node processes running: each one that exits, for whatever reason (a crash, a
 * Fatal error, a kill), is started again after a backoff, until `stop`. This is what a
 * Fatal worker's non-zero exit relies on to come back clean.
 */
export class Supervisor {
  private readonly processes: Running[] = [];
  private stopping = false;

  constructor(private readonly options: SupervisorOptions) {}

  start(spec: SupervisedProcess): void {
    const running: Running = {
      spec,
      child: undefined,
      startedAt: 0,
      delayMs: this.options.restartDelayMs ?? 1000,
      restartTimer: undefined,
      restarts: 0,
      killer: undefined,
    };
    this.processes.push(running);
    this.launch(running);
  }

  /** The pids of the processes running now, by name. */
  pids(): Record<string, number | undefined> {
    return Object.fromEntries(this.processes.map((p) => [p.spec.name, p.child?.pid]));
  }

  private launch(running: Running): void {
    const { spec } = running;
    // A process group of its own: a Ctrl-C in the terminal reaches only the supervisor,
    // which relays it, so a worker never takes one Ctrl-C for two signals (stop at once).
    const child = spawn(process.execPath, spec.args, { stdio: ['ignore', 'inherit', 'inherit'], env: spec.env ?? process.env, detached: true });
    running.child = child;
    running.startedAt = Date.now();
    child.once('exit', (code, signal) => {
      running.child = undefined;
      if (this.stopping) return;
      const ranMs = Date.now() - running.startedAt;
      if (ranMs >= (this.options.healthyAfterMs ?? 60_000)) running.delayMs = this.options.restartDelayMs ?? 1000;
      running.restarts += 1;
      this.options.logger.warn({ process: spec.name, code, signal, restartInMs: running.delayMs, restarts: running.restarts }, 'process exited; restarting');
      running.restartTimer = setTimeout(() => this.launch(running), running.delayMs);
      running.delayMs = Math.min(running.delayMs * 2, this.options.maxRestartDelayMs ?? 30_000);
    });
  }

  /** SIGTERM to every process (a worker then drains), SIGKILL to any still there after the grace period. */
  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(
      this.processes.map(async (running) => {
        clearTimeout(running.restartTimer);
        const child = running.child;
        if (!child || child.exitCode !== null || child.signalCode !== null) return;
        const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
        child.kill('SIGTERM');
        running.killer = setTimeout(() => child.kill('SIGKILL'), this.options.stopGraceMs ?? 30_000);
        await exited;
        clearTimeout(running.killer);
      }),
    );
  }

  /** During `stop`: a second SIGTERM to every process still there (a worker then stops at once), SIGKILL soon after. */
  hurry(): void {
    for (const running of this.processes) {
      const child = running.child;
      if (!this.stopping || !child || child.exitCode !== null || child.signalCode !== null) continue;
      child.kill('SIGTERM');
      clearTimeout(running.killer);
      running.killer = setTimeout(() => child.kill('SIGKILL'), this.options.hurryGraceMs ?? 5_000);
    }
  }
}
