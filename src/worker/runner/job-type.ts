import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { isValidName, NAME_RULE, submissionLimits } from '../../submission/rules.js';
import { envNameProblem } from './job-env.js';
import { describeValue } from './json-value.js';

/**
 * Everything job-type code gets. It holds no broker, ledger, storage or lease handle on
 * purpose: a job has nothing it could upload or announce with, so the worker's fence
 * around outputs holds for every job type anyone writes.
 */
export interface JobContext {
  /** The job's input as submitted: plain JSON. */
  input: unknown;
  /** A folder only this attempt uses; outputs must be written here. */
  scratchDir: string;
  /**
   * Reports how far the job is, from 0 to 1 (values outside are clamped; a value that is
   * not a number throws). Throttled: the first and the last report always pass, the ones
   * between at most once per interval. Reports made after the job returned are dropped.
   */
  progress(fraction: number, message?: string): void;
  /**
   * Adds a line to the attempt's log, beside what the job prints to stdout and stderr
   * (`planrun logs <id>`), with `fields` (plain JSON) kept as they are. A line logged after
   * the job returned is dropped.
   */
  log(message: string, fields?: Record<string, unknown>): void;
  /** Aborts when the worker wants the job to stop: the job should return or throw soon after. */
  signal: AbortSignal;
  jobId: string;
  attempt: number;
  tenant: string;
}

export interface JobRunResult {
  /** Plain JSON, stored as the job's result. */
  data?: unknown;
  /** Files the job wrote, relative to `scratchDir`; the worker stores them. */
  outputs?: string[];
}

/** What every job type can declare, whatever language it is written in. */
export interface JobTypeOptions {
  /** Letters, digits, `-` and `_`, starting with a letter. */
  name: string;
  /** Capabilities a worker needs to run this type (e.g. `ffmpeg`, `gpu`). */
  requires?: string[];
  /** Disk space one run needs for its outputs; admission reserves it before starting the job. */
  outputReserveBytes?: number;
  /**
   * Top-level input fields that name a file to fetch. When such a field holds an
   * `https://`, `http://` or `s3://` URL, the worker fetches it into the scratch folder
   * before the run, and the job sees the field holding that local path instead (a local
   * path is left as it is). See docs/storage.md, "Inputs by URL".
   */
  inputFiles?: string[];
  /** The largest input file this type takes, in bytes; the worker's `--max-input-size` when absent. */
  maxInputBytes?: number;
  /**
   * Environment variables the job needs from the worker's environment (e.g. `HF_HOME`),
   * beyond PATH, LANG, TZ, HOME and TMPDIR. planrun's own settings and credentials
   * (PLANRUN_*, AMQP URLs, AWS_*) are refused.
   */
  env?: string[];
  /** In a sandbox, the job gets the network (never the broker's socket, never the worker's files). */
  network?: boolean;
  /** How long one run may take unless the submission says otherwise; the worker's `--job-timeout` when absent. */
  timeoutSeconds?: number;
  /** A run past its timeout is Transient `timeout` (tried again) unless this is `'permanent'`. */
  timeoutClass?: 'transient' | 'permanent';
  /**
   * What one run's processes may use together, enforced by the kernel (a cgroup per job);
   * a run that hits a limit ends Permanent `resource_limit`. `processes` counts threads
   * too (Node itself runs about a dozen).
   */
  limits?: { memoryMb?: number; processes?: number };
}

/** A job type written in Node: `run(ctx)` in a job process planrun starts. */
export interface NodeJobType extends JobTypeOptions {
  /** Returning nothing counts as `{}`. */
  run(ctx: JobContext): Promise<JobRunResult> | JobRunResult;
  command?: undefined;
}

/**
 * A job type written in any language: a program planrun starts for each job, speaking the
 * protocol of docs/job-protocol.md (input in a file and on stdin, progress lines on fd 3,
 * a result file, sysexits exit codes).
 */
export interface CommandJobType extends JobTypeOptions {
  /**
   * The program and its arguments. A program named without a `/` is looked up in PATH; one
   * with a `/`, and any argument naming a file in the job-types module's folder (a script:
   * `['python3', 'upscale.py']`), resolve against that folder.
   */
  command: string[];
  run?: undefined;
}

export type JobType = NodeJobType | CommandJobType;

export function isCommandJobType(jobType: JobType): jobType is CommandJobType {
  return jobType.command !== undefined;
}

const JOB_TYPE_PROPERTIES = [
  'name',
  'requires',
  'outputReserveBytes',
  'inputFiles',
  'maxInputBytes',
  'env',
  'network',
  'timeoutSeconds',
  'timeoutClass',
  'limits',
  'run',
  'command',
];

// A job-types file for teams with no Node code: `{ "jobTypes": [{ "name", "command", ... }] }`.
const JOB_TYPES_FILE_EXTENSIONS: readonly string[] = ['.json', '.yaml', '.yml'];

// Type names and capabilities end up as words of AMQP topic routing keys
// (`<tenant>.<type>.<state>`) and items of the comma-separated `--capabilities` flag, so
// they follow the submission rules' name rule, which keeps `.`, `*`, `#`, `,` and spaces out.

/** Checks a job type where it is written, so a mistake points at the definition, not at a failed job. */
export function defineJobType<T extends JobType>(jobType: T): T {
  const problems = jobTypeProblems(jobType);
  if (problems.length > 0) {
    throw new TypeError(`invalid job type ${labelOf(jobType)}: ${problems.join('; ')}`);
  }
  return jobType;
}

/**
 * Imports a job-types module and checks that its default export is a non-empty list of
 * valid job types with distinct names. `modulePath` is a URL (`file:`, `data:`) or a file
 * path, resolved against the current directory. Throws one error listing every problem.
 */
export async function loadJobTypes(modulePath: string): Promise<JobType[]> {
  const url = toModuleUrl(modulePath);
  const list = isJobTypesFile(url) ? await readJobTypesFile(modulePath, url) : await importJobTypes(modulePath, url);

  const problems: string[] = [];
  if (list.length === 0) problems.push('the list is empty');
  const indexByName = new Map<string, number>();
  list.forEach((entry: unknown, index) => {
    const label = `job type #${index} ${labelOf(entry)}`;
    for (const problem of jobTypeProblems(entry)) problems.push(`${label}: ${problem}`);
    const name = nameOf(entry);
    if (name === undefined) return;
    const earlier = indexByName.get(name);
    if (earlier !== undefined) problems.push(`${label}: duplicate name, job type #${earlier} is also called "${name}"`);
    else indexByName.set(name, index);
  });
  if (problems.length > 0) {
    throw new TypeError(`invalid job types module ${modulePath}:\n  - ${problems.join('\n  - ')}`);
  }
  const folder = url.startsWith('file:') ? path.dirname(fileURLToPath(url)) : undefined;
  return (list as JobType[]).map((jobType) => (isCommandJobType(jobType) && folder !== undefined ? resolveCommand(jobType, folder) : jobType));
}

async function importJobTypes(modulePath: string, url: string): Promise<unknown[]> {
  let imported: Record<string, unknown>;
  try {
    imported = await importModule(url);
  } catch (error) {
    throw new Error(`cannot load job types module ${modulePath}: ${error instanceof Error ? error.message : String(error)}`, {
      cause: error,
    });
  }
  const list = defaultExport(imported);
  if (!Array.isArray(list)) {
    throw new TypeError(
      `job types module ${modulePath} must default-export a list of job types (export default [jobType, ...]); ` +
        `its default export is ${describeValue(list)}`,
    );
  }
  return list as unknown[];
}

/** Whether a module path or URL names a JSON or YAML job-types file rather than a module. */
export function isJobTypesFile(modulePath: string): boolean {
  const file = /^[a-z][a-z0-9+.-]+:/i.test(modulePath) ? new URL(modulePath).pathname : modulePath;
  return JOB_TYPES_FILE_EXTENSIONS.includes(path.extname(file).toLowerCase());
}

/** A JSON or YAML job-types file: `{ jobTypes: [...] }`, command job types only (a file holds no code). */
async function readJobTypesFile(modulePath: string, url: string): Promise<unknown[]> {
  let parsed: unknown;
  try {
    const text = await readFile(new URL(url), 'utf8');
    parsed = path.extname(new URL(url).pathname).toLowerCase() === '.json' ? JSON.parse(text) : parseYaml(text);
  } catch (error) {
    throw new Error(`cannot load job types file ${modulePath}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
  const list = typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as { jobTypes?: unknown }).jobTypes : undefined;
  if (!Array.isArray(list)) {
    throw new TypeError(`job types file ${modulePath} must hold { "jobTypes": [{ "name": ..., "command": [...] }, ...] }; it holds ${describeValue(parsed)}`);
  }
  return list as unknown[];
}

/**
 * A command as it runs: a program named with a `/` (`./run.sh`, `bin/tool`), and every
 * argument naming a file in the module's folder (`upscale.py`), become absolute paths there;
 * a bare program name (`python3`) stays for the PATH lookup, as in a shell.
 */
function resolveCommand(jobType: CommandJobType, folder: string): CommandJobType {
  const [program, ...args] = jobType.command as [string, ...string[]];
  const resolvedProgram = program.includes('/') ? path.resolve(folder, program) : program;
  const resolvedArgs = args.map((arg) => (!path.isAbsolute(arg) && existsSync(path.join(folder, arg)) ? path.join(folder, arg) : arg));
  return { ...jobType, command: [resolvedProgram, ...resolvedArgs] };
}

/** Loads several job-types modules into one registry by name; a name defined twice is an error. */
export async function loadJobTypeRegistry(modulePaths: string[]): Promise<Map<string, JobType>> {
  const registry = new Map<string, JobType>();
  const moduleByName = new Map<string, string>();
  for (const modulePath of modulePaths) {
    for (const jobType of await loadJobTypes(modulePath)) {
      const other = moduleByName.get(jobType.name);
      if (other !== undefined) {
        throw new TypeError(`job type "${jobType.name}" is defined twice: in ${other} and in ${modulePath}`);
      }
      moduleByName.set(jobType.name, modulePath);
      registry.set(jobType.name, jobType);
    }
  }
  return registry;
}

/** The extensions of the TypeScript modules planrun loads itself (through tsx). */
export const TYPESCRIPT_EXTENSIONS: readonly string[] = ['.ts', '.mts', '.cts'];

/** Whether a module path or URL names a TypeScript file. */
export function isTypeScriptModule(modulePath: string): boolean {
  const file = /^[a-z][a-z0-9+.-]+:/i.test(modulePath) ? new URL(modulePath).pathname : modulePath;
  return TYPESCRIPT_EXTENSIONS.includes(path.extname(file).toLowerCase());
}

let typeScriptLoader: Promise<void> | undefined;

/**
 * Imports a module; a TypeScript one through tsx, whose hooks this process registers the
 * first time it meets one, and only then: a worker given JavaScript modules alone never
 * loads tsx. tsx strips the types without checking them (that is tsc's job), keeps source
 * maps (stacks name the .ts lines), and takes a file the way Node would take its .js twin:
 * ESM in a `"type": "module"` package or as .mts, CommonJS otherwise; hence both hooks.
 */
async function importModule(url: string): Promise<Record<string, unknown>> {
  if (isTypeScriptModule(url)) await (typeScriptLoader ??= registerTypeScriptLoader());
  return (await import(url)) as Record<string, unknown>;
}

async function registerTypeScriptLoader(): Promise<void> {
  const [esm, cjs] = await Promise.all([import('tsx/esm/api'), import('tsx/cjs/api')]);
  esm.register();
  cjs.register();
}

/**
 * The module's default export. A CommonJS module compiled from ESM (tsc's `module:
 * commonjs`, or a .ts file tsx loads as CommonJS) keeps it as `exports.default` beside the
 * `__esModule` marker, and import() hands the whole `exports` object over as the default.
 */
function defaultExport(imported: Record<string, unknown>): unknown {
  const value = imported.default;
  if (typeof value === 'object' && value !== null && (value as { __esModule?: unknown }).__esModule === true && 'default' in value) {
    return value.default;
  }
  return value;
}

/** A URL is kept as is; anything else is a file path, resolved against the current directory. */
export function toModuleUrl(modulePath: string): string {
  // Two letters at least, so a Windows drive (`C:`) is not taken for a URL scheme.
  return /^[a-z][a-z0-9+.-]+:/i.test(modulePath) ? modulePath : pathToFileURL(path.resolve(modulePath)).href;
}

function jobTypeProblems(value: unknown): string[] {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return [`is ${describeValue(value)}, not a job type object ({ name, run, ... } or { name, command, ... })`];
  }
  const jobType = value as Record<string, unknown>;
  const problems: string[] = [];
  for (const key of Object.keys(jobType)) {
    if (!JOB_TYPE_PROPERTIES.includes(key)) {
      problems.push(`unknown property "${key}" (a job type has ${JOB_TYPE_PROPERTIES.join(', ')})`);
    }
  }
  if (jobType.name === undefined) problems.push('name is missing');
  else if (typeof jobType.name !== 'string') problems.push(`name is ${describeValue(jobType.name)}, not a string`);
  else if (!isValidName(jobType.name)) problems.push(`name ${JSON.stringify(jobType.name)} ${NAME_RULE}`);

  problems.push(...codeProblems(jobType));

  if (jobType.requires !== undefined) {
    if (!Array.isArray(jobType.requires)) {
      problems.push(`requires is ${describeValue(jobType.requires)}, not a list of capability names`);
    } else {
      for (const capability of jobType.requires as unknown[]) {
        if (typeof capability !== 'string' || !isValidName(capability)) {
          problems.push(`requires holds ${describeValue(capability)}; a capability name ${NAME_RULE}`);
        }
      }
    }
  }
  const reserve = jobType.outputReserveBytes;
  if (reserve !== undefined && !(typeof reserve === 'number' && Number.isSafeInteger(reserve) && reserve >= 0)) {
    problems.push(`outputReserveBytes is ${describeValue(reserve)}, not a whole number of bytes >= 0`);
  }
  const inputFiles = jobType.inputFiles;
  if (inputFiles !== undefined && !(Array.isArray(inputFiles) && inputFiles.every((field) => typeof field === 'string' && field !== ''))) {
    problems.push(`inputFiles is ${describeValue(inputFiles)}, not a list of input field names`);
  }
  const maxInput = jobType.maxInputBytes;
  if (maxInput !== undefined && !(typeof maxInput === 'number' && Number.isSafeInteger(maxInput) && maxInput > 0)) {
    problems.push(`maxInputBytes is ${describeValue(maxInput)}, not a whole number of bytes > 0`);
  }
  problems.push(...sandboxProblems(jobType));
  return problems;
}

/** Exactly one of `run` (Node) and `command` (any language). */
function codeProblems(jobType: Record<string, unknown>): string[] {
  const { run, command } = jobType;
  if (run !== undefined && command !== undefined) {
    return ['has both run and command; a job type is either run(ctx) in Node or a command: [program, ...args]'];
  }
  if (command !== undefined) {
    if (!Array.isArray(command) || command.length === 0 || !command.every((item) => typeof item === 'string')) {
      return [`command is ${describeValue(command)}, not a list of strings [program, ...args]`];
    }
    if (command[0] === '') return ['command names no program: its first item is empty'];
    if (command.some((item) => item.includes('\0'))) return ['command holds a NUL character'];
    return [];
  }
  if (run === undefined) return ['run is missing (every job type needs run(ctx), or a command: [program, ...args])'];
  if (typeof run !== 'function') return [`run is ${describeValue(run)}, not a function`];
  return [];
}

function sandboxProblems(jobType: Record<string, unknown>): string[] {
  const problems: string[] = [];
  const { env, network, timeoutSeconds, timeoutClass, limits } = jobType;
  if (env !== undefined) {
    if (!Array.isArray(env)) problems.push(`env is ${describeValue(env)}, not a list of environment variable names`);
    else {
      for (const name of env as unknown[]) {
        const problem = envNameProblem(name);
        if (problem !== undefined) problems.push(`env: ${problem}`);
      }
    }
  }
  if (network !== undefined && typeof network !== 'boolean') problems.push(`network is ${describeValue(network)}, not true or false`);
  if (timeoutSeconds !== undefined && !isPositiveSeconds(timeoutSeconds)) {
    problems.push(`timeoutSeconds is ${describeValue(timeoutSeconds)}, not a whole number of seconds >= 1`);
  }
  if (timeoutClass !== undefined && timeoutClass !== 'transient' && timeoutClass !== 'permanent') {
    problems.push(`timeoutClass is ${describeValue(timeoutClass)}, not "transient" or "permanent"`);
  }
  if (limits !== undefined) problems.push(...limitsProblems(limits));
  return problems;
}

// The same minimums a submission's limits are held to.
const LIMIT_MINIMUMS: Record<string, number> = submissionLimits.limitMinimums;

function limitsProblems(limits: unknown): string[] {
  if (typeof limits !== 'object' || limits === null || Array.isArray(limits)) return [`limits is ${describeValue(limits)}, not { memoryMb?, processes? }`];
  return Object.entries(limits).flatMap(([key, value]) => {
    const minimum = LIMIT_MINIMUMS[key];
    if (minimum === undefined) return [`limits has unknown property "${key}" (it has memoryMb, processes)`];
    if (value === undefined || (typeof value === 'number' && Number.isSafeInteger(value) && value >= minimum)) return [];
    return [`limits.${key} is ${describeValue(value)}, not a whole number >= ${minimum} (a job process needs that much to start)`];
  });
}

export function isPositiveSeconds(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 1;
}

function nameOf(value: unknown): string | undefined {
  const name = typeof value === 'object' && value !== null ? (value as { name?: unknown }).name : undefined;
  return typeof name === 'string' ? name : undefined;
}

function labelOf(value: unknown): string {
  const name = nameOf(value);
  return name === undefined ? '(unnamed)' : JSON.stringify(name);
}
