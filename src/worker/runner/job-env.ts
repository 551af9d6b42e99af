/**
 * The environment of a job process: an allowlist, never the worker's environment. Job
 * code is not trusted with planrun's configuration or credentials, so those names are
 * refused even when a job type or the operator asks for them.
 */

/** Names every job process gets, when the worker has them (HOME and TMPDIR are set per job). */
export const BASE_ENV_NAMES: readonly string[] = ['PATH', 'LANG', 'TZ'];

const DEFAULT_PATH = '/usr/local/bin:/usr/bin:/bin';

const ENV_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * What a job may never be handed: planrun's own settings (PLANRUN_*, the fleet key among
 * them), anything naming the broker (AMQP URLs carry passwords), cloud credentials
 * (AWS_*, which the S3 output store reads), Node's IPC plumbing, and the names the
 * worker sets itself.
 */
const FORBIDDEN_ENV: readonly { pattern: RegExp; why: string }[] = [
  { pattern: /^PLANRUN_(INPUT_FILE|RESULT_FILE|PROGRESS_FD)$/, why: 'the worker sets it for each command job (docs/job-protocol.md)' },
  { pattern: /^PLANRUN_/i, why: "planrun's own configuration and credentials (the fleet key, the broker URL)" },
  { pattern: /AMQP/i, why: 'broker URLs carry credentials' },
  { pattern: /^AWS_/i, why: 'cloud credentials (the output store uses them)' },
  { pattern: /^NODE_CHANNEL_/i, why: "the job process's channel to the worker" },
  { pattern: /^(HOME|TMPDIR)$/, why: "the worker sets it to the job's scratch folder" },
];

/**
 * The names of the job protocol (docs/job-protocol.md) the worker sets for a command job:
 * paths inside its scratch folder and a file descriptor, never a credential. They are
 * the only PLANRUN_* names a job ever gets, and only from the worker, never copied from its
 * environment.
 */
export const PROTOCOL_ENV = {
  inputFile: 'PLANRUN_INPUT_FILE',
  resultFile: 'PLANRUN_RESULT_FILE',
  progressFd: 'PLANRUN_PROGRESS_FD',
} as const;

/** planrun settings that are meant for job code (a path, no credential): a job type may declare them. */
const SETTINGS_FOR_JOBS: readonly string[] = ['PLANRUN_FFMPEG'];

/** Why a job may not be given this variable, or undefined when it may. */
export function envNameProblem(name: unknown): string | undefined {
  if (typeof name !== 'string' || !ENV_NAME_PATTERN.test(name)) {
    return `${JSON.stringify(name)} is not an environment variable name (letters, digits and _, not starting with a digit)`;
  }
  if (SETTINGS_FOR_JOBS.includes(name)) return undefined;
  const forbidden = FORBIDDEN_ENV.find(({ pattern }) => pattern.test(name));
  return forbidden ? `${name} is never handed to job code: ${forbidden.why}` : undefined;
}

/**
 * The environment of one job process: the base names and the `passed` ones (declared by
 * the job type, passed by the operator) copied from `source` when set there, HOME and
 * TMPDIR pointing at `home` (the job's scratch folder). Throws on a forbidden name, so a
 * check missed upstream cannot leak a credential.
 */
export function jobEnvironment(passed: readonly string[], home: string, source: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const problems = passed.map(envNameProblem).filter((problem) => problem !== undefined);
  if (problems.length > 0) throw new RangeError(`job environment: ${problems.join('; ')}`);
  const env: Record<string, string> = { PATH: DEFAULT_PATH };
  for (const name of [...BASE_ENV_NAMES, ...passed]) {
    const value = source[name];
    if (value !== undefined) env[name] = value;
  }
  env.HOME = home;
  env.TMPDIR = home;
  return env;
}
