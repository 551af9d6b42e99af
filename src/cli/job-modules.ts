import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { resolveCommandPrograms } from '../worker/runner/command-program.js';
import { jobEnvironment } from '../worker/runner/job-env.js';
import { isCommandJobType, isJobTypesFile, isTypeScriptModule, loadJobTypeRegistry, loadJobTypes, type JobType } from '../worker/runner/job-type.js';
import { builtInJobTypesModule } from './commands/worker.js';
import { UsageError } from './options.js';

/**
 * The `--jobs` modules, loaded and checked before anything starts. A module that cannot
 * load would otherwise surface only in the workers, each one crashing and restarting with
 * a stack trace while the API says it is ready and jobs wait for ever. Each problem is one
 * UsageError line (the file, the line of a syntax error, what is wrong), so `up` and
 * `worker` exit with code 2 before they start anything.
 */
export async function checkJobModules(given: readonly string[]): Promise<{ modules: string[]; registry: Map<string, JobType> }> {
  for (const module of given) {
    const file = resolve(module);
    if (!existsSync(file)) throw new UsageError(`job types module ${module}: no such file`);
    try {
      await loadJobTypes(file);
    } catch (error) {
      throw new UsageError(describeLoadFailure(module, file, error));
    }
  }
  const modules = [builtInJobTypesModule, ...given.map((module) => resolve(module))];
  try {
    const registry = await loadJobTypeRegistry(modules);
    // The programs of command job types, as the worker's PATH finds them (a sandbox may see fewer: the worker checks again).
    resolveCommandPrograms([...registry.values()].filter(isCommandJobType), jobEnvironment([], tmpdir()).PATH ?? '', () => true);
    return { modules, registry };
  } catch (error) {
    throw new UsageError(oneLine(error instanceof Error ? error.message : String(error)));
  }
}

function describeLoadFailure(module: string, file: string, error: unknown): string {
  // A JSON or YAML file's parser already says where it stopped.
  if (isJobTypesFile(file)) return oneLine(error instanceof Error ? error.message : String(error));
  const cause = error instanceof Error && error.cause instanceof Error ? error.cause : undefined;
  const typeScript = cause && isTypeScriptModule(file) ? typeScriptSyntaxError(cause) : undefined;
  if (typeScript) return `job types module ${module}:${typeScript.line}: SyntaxError: ${typeScript.message}`;
  if (cause instanceof SyntaxError) {
    const line = syntaxErrorLine(file);
    return `job types module ${module}${line === undefined ? '' : `:${line}`}: SyntaxError: ${cause.message}`;
  }
  if (cause) {
    // An error thrown while the module ran: point at where, when the stack says so.
    const at = new RegExp(`(?:${escape(pathToFileURL(file).href)}|${escape(file)}):(\\d+)`).exec(cause.stack ?? '');
    return `job types module ${module}${at ? `:${at[1]}` : ''} failed to load: ${oneLine(`${cause.name}: ${cause.message}`)}`;
  }
  return oneLine(error instanceof Error ? error.message : String(error));
}

/**
 * tsx (esbuild) refuses a .ts file it cannot parse with an Error whose message reads
 * `Transform failed with 1 error:\n<file>:<line>:<column>: ERROR: <what>`; the first
 * error is the one to fix.
 */
function typeScriptSyntaxError(error: Error): { line: number; message: string } | undefined {
  if (!error.message.startsWith('Transform failed')) return undefined;
  const first = /^.+?:(\d+):\d+: ERROR: (.+)$/m.exec(error.message);
  return first ? { line: Number(first[1]), message: first[2]! } : undefined;
}

/**
 * Where the syntax error is: Node's import() does not say, `node --check` does. A `.js`
 * file in no `"type": "module"` package is checked as ESM through stdin, as import()
 * would have taken it once CommonJS failed.
 */
function syntaxErrorLine(file: string): number | undefined {
  const checks = [
    { args: ['--check', file], input: undefined, prefix: file },
    { args: ['--input-type=module', '--check'], input: readFileSync(file), prefix: '[stdin]' },
  ];
  for (const { args, input, prefix } of checks) {
    const checked = spawnSync(process.execPath, args, { encoding: 'utf8', timeout: 10_000, ...(input ? { input } : {}) });
    const match = new RegExp(`^${escape(prefix)}:(\\d+)`, 'm').exec(checked.stderr ?? '');
    if (match) return Number(match[1]);
  }
  return undefined;
}

/** loadJobTypes lists the problems of a module one per line; the command says them on one. */
function oneLine(message: string): string {
  return message
    .replace(/:\n\s*- /, ': ')
    .replace(/\n\s*- /g, '; ')
    .replace(/\s*\n\s*/g, ' ');
}

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
