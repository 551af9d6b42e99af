import { existsSync, readFileSync } from 'node:fs';
import { mkdir, readdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';

/**
 * A control group per job, for the limits a job type declares: how many processes its
 * processes may make (the `pids` controller) and how much memory they may hold together
 * (`memory`). The kernel counts every process the job starts, whatever it runs and
 * whichever user it runs as, and knows when a limit stopped one: that is how a fork bomb
 * or a memory hog ends its job, never the worker.
 *
 * cgroup v1 hierarchies only (what this machine and most containers give a root worker:
 * writable `/sys/fs/cgroup/<controller>/<own path>`). A cgroup v2 tree needs its
 * controllers delegated to a subtree (systemd's `Delegate=`), which planrun does not set
 * up: there `available()` is false and the limit cannot be enforced.
 */
export interface CgroupLimits {
  memoryMb?: number;
  processes?: number;
}

const CGROUP_ROOT = '/sys/fs/cgroup';
let jobCounter = 0;

/** The folder of this process's cgroup in the v1 hierarchy of `controller`, when that is writable here. */
export function ownCgroupDir(controller: 'pids' | 'memory'): string | undefined {
  let lines: string[];
  try {
    lines = readFileSync('/proc/self/cgroup', 'utf8').split('\n');
  } catch {
    return undefined;
  }
  for (const line of lines) {
    const [, controllers, cgroupPath] = line.split(':');
    if (controllers === undefined || cgroupPath === undefined || !controllers.split(',').includes(controller)) continue;
    const dir = path.join(CGROUP_ROOT, controller, cgroupPath);
    return existsSync(path.join(dir, 'cgroup.procs')) ? dir : undefined;
  }
  return undefined;
}

export class JobCgroup {
  private constructor(
    private readonly dirs: { pids?: string; memory?: string },
    readonly limits: CgroupLimits,
  ) {}

  /**
   * Makes the job's cgroups with their limits. Throws when a limit is asked for and this
   * machine has no writable controller for it: an unenforced limit must not pass for one.
   */
  static async create(limits: CgroupLimits): Promise<JobCgroup> {
    const name = `planrun-${process.pid}-${++jobCounter}`;
    const dirs: { pids?: string; memory?: string } = {};
    if (limits.processes !== undefined) {
      dirs.pids = await makeChild('pids', name);
      await writeFile(path.join(dirs.pids, 'pids.max'), String(limits.processes));
    }
    if (limits.memoryMb !== undefined) {
      dirs.memory = await makeChild('memory', name);
      const bytes = String(limits.memoryMb * 1024 * 1024);
      await writeFile(path.join(dirs.memory, 'memory.limit_in_bytes'), bytes);
      // With swap, the limit would only push the job's memory out to disk.
      const withSwap = path.join(dirs.memory, 'memory.memsw.limit_in_bytes');
      if (existsSync(withSwap)) await writeFile(withSwap, bytes).catch(() => undefined);
    }
    return new JobCgroup(dirs, limits);
  }

  /**
   * Puts a process and its descendants in the cgroups (the job's, before it runs any job
   * code: a sandbox has forked its own by then); what they start later follows by itself.
   */
  async add(pid: number): Promise<void> {
    const pids = [pid, ...(await descendants(pid))];
    for (const dir of Object.values(this.dirs)) {
      for (const member of pids) await writeFile(path.join(dir, 'cgroup.procs'), String(member));
    }
  }

  /** Which limit stopped a process of the job, if one did. */
  async exceeded(): Promise<string | undefined> {
    if (this.dirs.pids && (await eventCount(path.join(this.dirs.pids, 'pids.events'), 'max')) > 0) {
      return `it tried to run more than ${this.limits.processes} processes at once`;
    }
    if (this.dirs.memory && (await eventCount(path.join(this.dirs.memory, 'memory.oom_control'), 'oom_kill')) > 0) {
      return `it needed more than ${this.limits.memoryMb} MB of memory`;
    }
    return undefined;
  }

  /** Kills whatever the job left running (a process it started and let go of) and removes the cgroups. */
  async destroy(): Promise<void> {
    for (const dir of Object.values(this.dirs)) {
      for (let round = 0; round < 50; round++) {
        const pids = (await readFile(path.join(dir, 'cgroup.procs'), 'utf8').catch(() => '')).split('\n').filter(Boolean).map(Number);
        if (pids.length === 0) break;
        for (const pid of pids) killQuietly(pid);
        await delay(20);
      }
      await rmdir(dir).catch(() => undefined);
    }
  }
}

async function makeChild(controller: 'pids' | 'memory', name: string): Promise<string> {
  const own = ownCgroupDir(controller);
  if (own === undefined) {
    throw new Error(`the job's ${controller} limit needs a writable cgroup v1 "${controller}" hierarchy, and this machine has none (see docs/security.md)`);
  }
  const dir = path.join(own, name);
  await mkdir(dir);
  return dir;
}

/** The processes below `pid`, from each process's parent in /proc/<pid>/stat. */
async function descendants(pid: number): Promise<number[]> {
  const parents = new Map<number, number>();
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => undefined);
    // "pid (name) state ppid ...": the name may hold spaces and parentheses, so read after the last ')'.
    const ppid = stat === undefined ? NaN : Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (Number.isSafeInteger(ppid)) parents.set(Number(entry), ppid);
  }
  const found: number[] = [];
  const wanted = new Set([pid]);
  for (let grew = true; grew;) {
    grew = false;
    for (const [child, parent] of parents) {
      if (wanted.has(parent) && !wanted.has(child)) {
        wanted.add(child);
        found.push(child);
        grew = true;
      }
    }
  }
  return found;
}

async function eventCount(file: string, key: string): Promise<number> {
  const text = await readFile(file, 'utf8').catch(() => '');
  const line = text.split('\n').find((entry) => entry.startsWith(`${key} `));
  return line === undefined ? 0 : Number(line.slice(key.length + 1));
}

function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // gone already
  }
}
