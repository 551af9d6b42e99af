import { accessSync, constants, existsSync, lstatSync, realpathSync } from 'node:fs';
import path from 'node:path';

/**
 * How job processes are confined. Takes the command a job needs to run (an argv, of a
 * Node job process or of any program) and returns what to spawn instead: bubblewrap's
 * argv around it, prlimit's around that, the user to run it as. Nothing here starts a
 * process, so every kind of job reuses it.
 */

export const SANDBOX_KINDS = ['none', 'bwrap'] as const;
export type SandboxKind = (typeof SANDBOX_KINDS)[number];

export interface JobUser {
  uid: number;
  gid: number;
  /** As the operator named it, for messages. */
  label: string;
}

export interface SandboxPolicy {
  kind: SandboxKind;
  /** Run job processes as this user rather than the worker's. */
  jobUser?: JobUser;
  /** The bubblewrap binary (`kind: 'bwrap'`). */
  bwrapPath?: string;
  /**
   * Folders job code must never see even when they lie inside a folder it may read (a job
   * module next to the data dir): the scratch root, the output folder, the data dir.
   */
  hiddenPaths?: string[];
}

/**
 * Limits the kernel enforces on each process of the job (setrlimit, through prlimit), where
 * the job gets no cgroup for them (see pool.ts): RLIMIT_DATA and RLIMIT_NPROC.
 */
export interface ProcessLimits {
  /**
   * Memory each process may make writable (heap, private mappings): RLIMIT_DATA. Unlike the
   * address space (RLIMIT_AS) it does not count reservations (V8's, glibc's arenas), only
   * what is made usable, so a program well under it is not refused.
   */
  dataBytes?: number;
  /** Processes (and threads) of the job's user, all its jobs together; enforced only for a user other than root. */
  processes?: number;
}

export interface SandboxedCommand {
  /** The program and its arguments. */
  argv: string[];
  /** The job's scratch folder: its working directory and, in a sandbox, the only place it may write. */
  scratchDir: string;
  /** Files and folders the command must be able to read: its program, its modules. */
  readable: string[];
  env: Record<string, string>;
  /** The sandbox gives the job a network namespace of its own unless this is true. */
  network: boolean;
  limits?: ProcessLimits;
}

export interface WrappedSpawn {
  file: string;
  args: string[];
  env: Record<string, string>;
  cwd: string;
  uid?: number;
  gid?: number;
}

export const DEFAULT_BWRAP_PATH = '/usr/bin/bwrap';
const PRLIMIT_PATH = '/usr/bin/prlimit';

// What any dynamically linked program needs from /etc to start, resolve names and check
// certificates; the rest of /etc (shadow, the machine's other configuration) stays out.
const ETC_ENTRIES = [
  'passwd',
  'group',
  'nsswitch.conf',
  'hosts',
  'resolv.conf',
  'localtime',
  'ld.so.cache',
  'ld.so.conf',
  'ld.so.conf.d',
  'ssl',
  'ca-certificates',
  'alternatives',
];
// On a merged-/usr system these are links into /usr, elsewhere folders of their own.
const ROOT_PROGRAM_DIRS = ['/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];

/** Whether a file lies in the system folders the bwrap sandbox shows every job (read-only). */
export function isSystemPath(file: string): boolean {
  return ['/usr', ...ROOT_PROGRAM_DIRS].some((dir) => isInside(path.resolve(file), dir));
}

/** Checks that the policy can work on this machine; throws a message for the operator when it cannot. */
export function checkSandbox(policy: SandboxPolicy): void {
  if (policy.kind === 'bwrap') {
    const bwrap = policy.bwrapPath ?? DEFAULT_BWRAP_PATH;
    try {
      accessSync(bwrap, constants.X_OK);
    } catch {
      throw new Error(`--sandbox bwrap needs bubblewrap, and ${bwrap} is not there (Debian/Ubuntu: apt-get install bubblewrap)`);
    }
  }
}

/** What to spawn to run `command` under `policy`. */
export function wrapCommand(policy: SandboxPolicy, command: SandboxedCommand): WrappedSpawn {
  let argv = policy.kind === 'bwrap' ? [policy.bwrapPath ?? DEFAULT_BWRAP_PATH, ...bwrapArgs(policy, command), '--', ...command.argv] : command.argv;
  argv = withLimits(argv, command.limits);
  const [file, ...args] = argv as [string, ...string[]];
  return {
    file,
    args,
    env: command.env,
    cwd: command.scratchDir,
    ...(policy.jobUser ? { uid: policy.jobUser.uid, gid: policy.jobUser.gid } : {}),
  };
}

function withLimits(argv: string[], limits: ProcessLimits | undefined): string[] {
  const flags: string[] = [];
  if (limits?.dataBytes !== undefined) flags.push(`--data=${limits.dataBytes}`);
  if (limits?.processes !== undefined) flags.push(`--nproc=${limits.processes}`);
  return flags.length === 0 ? argv : [PRLIMIT_PATH, ...flags, '--', ...argv];
}

function bwrapArgs(policy: SandboxPolicy, command: SandboxedCommand): string[] {
  const args = [
    '--unshare-pid',
    '--unshare-ipc',
    '--unshare-uts',
    '--unshare-cgroup-try',
    ...(command.network ? [] : ['--unshare-net']),
    '--die-with-parent',
    '--new-session',
    '--hostname',
    'planrun-job',
    '--proc',
    '/proc',
    '--dev',
    '/dev',
    // Private, and first: what is bound below may lie under /tmp.
    '--tmpfs',
    '/tmp',
    '--ro-bind',
    '/usr',
    '/usr',
  ];
  for (const dir of ROOT_PROGRAM_DIRS) {
    if (!existsSync(dir)) continue;
    const stat = lstatSync(dir);
    if (stat.isSymbolicLink()) args.push('--symlink', readLink(dir), dir);
    else args.push('--ro-bind', dir, dir);
  }
  for (const entry of ETC_ENTRIES) {
    const file = path.join('/etc', entry);
    if (existsSync(file)) args.push('--ro-bind', file, file);
  }
  // Shortest first: a folder before what lies inside it.
  const readable = [...new Set(command.readable.filter(existsSync).map((item) => path.resolve(item)))].sort((a, b) => a.length - b.length);
  for (const item of readable) args.push('--ro-bind', item, item);
  // Over anything readable that holds them, so the job sees empty folders there.
  for (const hidden of (policy.hiddenPaths ?? []).map((item) => path.resolve(item))) {
    if (readable.some((item) => isInside(hidden, item))) args.push('--tmpfs', hidden);
  }
  args.push('--bind', command.scratchDir, command.scratchDir, '--chdir', command.scratchDir);
  return args;
}

function readLink(link: string): string {
  return path.relative(path.dirname(link), realpathSync(link));
}

function isInside(child: string, parent: string): boolean {
  const relative = path.relative(parent, child);
  return relative === '' || (!relative.startsWith('..') && !path.isAbsolute(relative));
}

/**
 * What a module file needs readable to load under Node: its folder, and the node_modules
 * folders and package.json files of the folders above it (where Node resolves packages
 * and reads whether a .js file is ESM).
 */
export function moduleReadablePaths(file: string): string[] {
  const paths = [path.dirname(file)];
  for (let dir = path.dirname(file); ; dir = path.dirname(dir)) {
    for (const name of ['node_modules', 'package.json']) {
      const candidate = path.join(dir, name);
      if (existsSync(candidate)) paths.push(candidate);
    }
    if (path.dirname(dir) === dir) break;
  }
  return paths;
}
