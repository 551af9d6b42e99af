/**
 * Small measuring tools the benchmark sections share: a clock that reads the same in
 * every process of the machine, percentiles, peak RSS read from /proc, RSS sampling of
 * processes the benchmark did not start (the shared RabbitMQ and Redis), CPU time.
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { loadavg } from 'node:os';

/**
 * Milliseconds since the epoch with sub-millisecond resolution. `timeOrigin` is taken
 * from the system clock when the process starts, so two processes on one machine agree
 * to well under a millisecond: good enough to time a job from submit (driver process)
 * to start (job process).
 */
export function hrNow(): number {
  return performance.timeOrigin + performance.now();
}

export function percentile(sorted: readonly number[], fraction: number): number {
  if (sorted.length === 0) return Number.NaN;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil(fraction * sorted.length) - 1));
  return sorted[index]!;
}

export interface LatencySummary {
  samples: number;
  p50Ms: number;
  p99Ms: number;
}

export function summarise(latenciesMs: readonly number[]): LatencySummary {
  const sorted = [...latenciesMs].sort((a, b) => a - b);
  return { samples: sorted.length, p50Ms: percentile(sorted, 0.5), p99Ms: percentile(sorted, 0.99) };
}

/** A field of /proc/<pid>/status in MiB (VmRSS: now, VmHWM: peak), or undefined if the process is gone. */
export function procStatusMiB(pid: number | 'self', field: 'VmRSS' | 'VmHWM'): number | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status);
    return match ? Number(match[1]) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** The pids of a process's direct children (e.g. a worker's job processes). */
export function childPids(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** The pid of the process listening on TCP `port` (e.g. RabbitMQ's 5672), found through /proc as root sees it. */
export function findListeningPid(port: number): number | undefined {
  const inodes = new Set<string>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    try {
      for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
        const fields = line.trim().split(/\s+/);
        // local_address is HEX_IP:HEX_PORT; state 0A is LISTEN; field 9 is the inode.
        if (fields[3] === '0A' && fields[1]?.endsWith(`:${port.toString(16).toUpperCase().padStart(4, '0')}`)) inodes.add(fields[9]!);
      }
    } catch {
      // No such table here.
    }
  }
  if (inodes.size === 0) return undefined;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      for (const fd of readdirSync(`/proc/${entry}/fd`)) {
        const target = readlinkSync(`/proc/${entry}/fd/${fd}`);
        if (target.startsWith('socket:[') && inodes.has(target.slice(8, -1))) return Number(entry);
      }
    } catch {
      // Gone, or not ours to read.
    }
  }
  return undefined;
}

/**
 * Samples the RSS of processes we did not start (their VmHWM is a lifetime peak, shared
 * with everyone else's tests): the highest VmRSS seen while the sampler ran.
 */
export class RssSampler {
  private readonly peaks = new Map<number, number>();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly pids: () => number[],
    intervalMs = 100,
  ) {
    this.sample();
    this.timer = setInterval(() => this.sample(), intervalMs);
    this.timer.unref();
  }

  private sample(): void {
    for (const pid of this.pids()) {
      const rss = procStatusMiB(pid, 'VmRSS');
      if (rss !== undefined) this.peaks.set(pid, Math.max(this.peaks.get(pid) ?? 0, rss));
    }
  }

  /** Stops sampling; returns the peak per pid. */
  stop(): Map<number, number> {
    this.sample();
    clearInterval(this.timer);
    return this.peaks;
  }
}

/** CPU time (user + system) of a process from /proc, in milliseconds (clock ticks of 10 ms), or 0 if it is gone. */
export function procCpuMs(pid: number): number {
  try {
    // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return 0;
  }
}

/** The 1-minute load average, rounded, for the record of a run. */
export function load1(): number {
  return Math.round(loadavg()[0]! * 100) / 100;
}

/** CPU time (user + system) of this process in milliseconds. */
export function cpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls `condition` until it holds or `timeoutMs` passes (then throws naming `what`). */
export async function until(what: string, condition: () => boolean, timeoutMs: number, pollMs = 5): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`benchmark: timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(pollMs);
  }
}
