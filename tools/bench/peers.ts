/**
 * The driver's side of the worker-side processes: forks them, gathers their progress and
 * latency marks, reads their peak RSS (and their job processes') from /proc, stops them.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { childPids, procCpuMs, procStatusMiB } from './measure.js';
import type { PeerConfig, PeerMessage } from './peer-protocol.js';

const peerEntry = fileURLToPath(new URL('./peer-process.js', import.meta.url));

export function profilingArgs(cpuProfileDir: string | undefined): string[] {
  return cpuProfileDir ? ['--cpu-prof', '--cpu-prof-dir', cpuProfileDir] : [];
}

class Peer {
  done = 0;
  lastAt = 0;
  readonly ready: Promise<void>;

  constructor(
    readonly child: ChildProcess,
    private readonly onStarted: (id: string, at: number) => void,
  ) {
    this.ready = new Promise((resolve, reject) => {
      child.on('message', (message: PeerMessage) => {
        if (message.kind === 'ready') resolve();
        else if (message.kind === 'failed') reject(new Error(`benchmark peer ${child.pid} failed: ${message.message}`));
        else if (message.kind === 'progress') {
          this.done = message.done;
          this.lastAt = message.lastAt;
        } else if (message.kind === 'started') this.onStarted(message.id, message.at);
      });
      child.on('exit', (code) => reject(new Error(`benchmark peer ${child.pid} exited (${code}) before it was ready`)));
    });
  }
}

export class Peers {
  private readonly peers: Peer[] = [];
  private readonly startedWaiters = new Map<string, (at: number) => void>();
  private readonly startedEarly = new Map<string, number>();

  constructor(private readonly cpuProfileDir?: string) {}

  /** Forks `count` processes of `config` and waits until each is consuming. */
  async start(count: number, config: (index: number) => PeerConfig): Promise<void> {
    for (let i = 0; i < count; i++) {
      const child = fork(peerEntry, [JSON.stringify(config(i))], {
        execArgv: profilingArgs(this.cpuProfileDir),
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      });
      this.peers.push(new Peer(child, (id, at) => this.started(id, at)));
    }
    await Promise.all(this.peers.map((peer) => peer.ready));
  }

  get done(): number {
    return this.peers.reduce((sum, peer) => sum + peer.done, 0);
  }

  get lastAt(): number {
    return Math.max(0, ...this.peers.map((peer) => peer.lastAt));
  }

  /** Resolves with the time the job (message) `id` was reported started. */
  waitStarted(id: string): Promise<number> {
    const early = this.startedEarly.get(id);
    if (early !== undefined) {
      this.startedEarly.delete(id);
      return Promise.resolve(early);
    }
    return new Promise((resolve) => this.startedWaiters.set(id, resolve));
  }

  private started(id: string, at: number): void {
    const waiter = this.startedWaiters.get(id);
    if (waiter) {
      this.startedWaiters.delete(id);
      waiter(at);
    } else this.startedEarly.set(id, at);
  }

  pids(): number[] {
    return this.peers.map((peer) => peer.child.pid!).filter(Boolean);
  }

  /** Highest peak RSS among the processes, and among their children (job processes). */
  peakRss(): { processMiB: number | undefined; childMiB: number | undefined } {
    let processMiB: number | undefined;
    let childMiB: number | undefined;
    for (const pid of this.pids()) {
      const own = procStatusMiB(pid, 'VmHWM');
      if (own !== undefined) processMiB = Math.max(processMiB ?? 0, own);
      for (const child of childPids(pid)) {
        const rss = procStatusMiB(child, 'VmHWM');
        if (rss !== undefined) childMiB = Math.max(childMiB ?? 0, rss);
      }
    }
    return { processMiB, childMiB };
  }

  /** CPU time of the processes and their children (job processes) so far, in milliseconds. */
  cpuMs(): number {
    const { own, children } = this.cpuSplitMs();
    return own + children;
  }

  /** CPU time so far of the processes themselves and of their children (job processes), in milliseconds. */
  cpuSplitMs(): { own: number; children: number } {
    let own = 0;
    let children = 0;
    for (const pid of this.pids()) {
      own += procCpuMs(pid);
      for (const child of childPids(pid)) children += procCpuMs(child);
    }
    return { own, children };
  }

  /**
   * CPU per job since `before` (a `cpuSplitMs()` reading): the processes and their
   * children together, and the children's part alone.
   */
  cpuPerJobSince(before: { own: number; children: number }, jobs: number): { workerCpuMsPerJob: number; jobProcessCpuMsPerJob: number } {
    const after = this.cpuSplitMs();
    const jobProcessCpuMsPerJob = (after.children - before.children) / jobs;
    return { workerCpuMsPerJob: (after.own - before.own) / jobs + jobProcessCpuMsPerJob, jobProcessCpuMsPerJob };
  }

  async stop(): Promise<void> {
    await Promise.all(
      this.peers.map(async (peer) => {
        if (peer.child.exitCode !== null || peer.child.signalCode !== null) return;
        const exited = once(peer.child, 'exit');
        peer.child.send({ kind: 'stop' });
        const killer = setTimeout(() => peer.child.kill('SIGKILL'), 15_000);
        await exited;
        clearTimeout(killer);
      }),
    );
  }
}
