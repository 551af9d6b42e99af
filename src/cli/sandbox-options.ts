import { readFileSync } from 'node:fs';
import { InvalidArgumentError, Option, type Command } from 'commander';
import { envNameProblem } from '../worker/runner/job-env.js';
import { SANDBOX_KINDS, checkSandbox, type JobUser, type SandboxKind, type SandboxPolicy } from '../worker/runner/sandbox.js';
import { collect, durationFlag, UsageError } from './options.js';

/** How job processes are confined, the same on `planrun worker` and `planrun up` (which hands them to its workers). */
export interface SandboxFlags {
  sandbox: SandboxKind;
  jobUser?: string;
  jobEnv?: string[];
  jobTimeout?: number;
}

export function addSandboxOptions(command: Command): Command {
  return command
    .addOption(
      new Option('--sandbox <kind>', 'confine job processes: bwrap (bubblewrap: no network, no files but their scratch) or none (trusted code)')
        .choices(SANDBOX_KINDS)
        .default('none'),
    )
    .option('--job-user <name|uid>', "run job processes as this user, out of reach of the worker's files and /proc entries")
    .option('--job-env <name>', "hand this variable of the worker's environment to every job (repeatable)", (value: string, previous?: string[]) =>
      collect(checkedEnvName(value), previous),
    )
    .addOption(durationFlag('--job-timeout <duration>', 'how long a job may run when neither its submission nor its type says'));
}

function checkedEnvName(name: string): string {
  const problem = envNameProblem(name);
  if (problem !== undefined) throw new InvalidArgumentError(problem);
  return name;
}

/** One line for people: which sandbox job processes run in, as whom. */
export function describeSandbox(flags: SandboxFlags): string {
  const kind =
    flags.sandbox === 'bwrap' ? 'bwrap (bubblewrap: no network, read-only system, only its scratch folder writable)' : 'none (job code runs as trusted code)';
  return flags.jobUser === undefined ? kind : `${kind}, as user ${flags.jobUser}`;
}

/** The flags again, for a worker that `planrun up` starts. */
export function sandboxArgs(flags: SandboxFlags): string[] {
  return [
    '--sandbox',
    flags.sandbox,
    ...(flags.jobUser === undefined ? [] : ['--job-user', flags.jobUser]),
    ...(flags.jobEnv ?? []).flatMap((name) => ['--job-env', name]),
    ...(flags.jobTimeout === undefined ? [] : ['--job-timeout', `${flags.jobTimeout}ms`]),
  ];
}

/** The policy the flags ask for, checked against this machine (bubblewrap installed, the user known). */
export function sandboxPolicy(flags: SandboxFlags, hiddenPaths: string[]): SandboxPolicy {
  const policy: SandboxPolicy = { kind: flags.sandbox, hiddenPaths, ...(flags.jobUser === undefined ? {} : { jobUser: resolveJobUser(flags.jobUser) }) };
  try {
    checkSandbox(policy);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  return policy;
}

/** A user name (looked up in /etc/passwd) or a numeric uid (its group from /etc/passwd, else the same number). */
export function resolveJobUser(spec: string, passwd = readPasswd()): JobUser {
  const numeric = /^\d+$/.test(spec);
  const entry = passwd.find((line) => (numeric ? line.uid === Number(spec) : line.name === spec));
  if (!numeric && !entry) throw new UsageError(`--job-user ${spec}: no such user in /etc/passwd (give a name that exists, or a uid)`);
  const uid = numeric ? Number(spec) : entry!.uid;
  if (uid === 0) throw new UsageError(`--job-user ${spec} is root: job processes would hold every right the worker has`);
  if (process.getuid?.() !== 0 && uid !== process.getuid?.()) {
    throw new UsageError(`--job-user ${spec}: only a worker running as root can start processes as another user`);
  }
  return { uid, gid: entry?.gid ?? uid, label: entry ? `${entry.name} (${uid})` : spec };
}

function readPasswd(): { name: string; uid: number; gid: number }[] {
  return readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .map((line) => line.split(':'))
    .filter((fields) => fields.length >= 4)
    .map(([name, , uid, gid]) => ({ name: name!, uid: Number(uid), gid: Number(gid) }));
}
