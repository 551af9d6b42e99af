import { accessSync, constants, statSync } from 'node:fs';
import path from 'node:path';
import type { CommandJobType } from './job-type.js';

/**
 * Finds the program of each command job type before any job runs, so a program missing on
 * this machine stops the worker at start with its name (a usage error of the operator),
 * rather than failing jobs one by one. A bare name is looked up in the job's PATH; in the
 * bwrap sandbox only in the folders the sandbox shows (`visible`), so the program the
 * worker finds is the one the job will run.
 */
export function resolveCommandPrograms(jobTypes: readonly CommandJobType[], searchPath: string, visible: (file: string) => boolean): Map<string, string[]> {
  const problems: string[] = [];
  const argvByName = new Map<string, string[]>();
  for (const jobType of jobTypes) {
    const [program, ...args] = jobType.command as [string, ...string[]];
    const found = program.includes('/') ? checkProgram(program) : lookUp(program, searchPath, visible);
    if (typeof found === 'string') argvByName.set(jobType.name, [found, ...args]);
    else problems.push(`job type "${jobType.name}": ${found.problem}`);
  }
  if (problems.length > 0) throw new Error(`cannot run command job types: ${problems.join('; ')}`);
  return argvByName;
}

function lookUp(program: string, searchPath: string, visible: (file: string) => boolean): string | { problem: string } {
  const dirs = searchPath.split(':').filter((dir) => path.isAbsolute(dir));
  for (const dir of dirs) {
    const candidate = path.join(dir, program);
    if (visible(candidate) && isExecutableFile(candidate)) return candidate;
  }
  return { problem: `program "${program}" is not in the job's PATH (${dirs.filter((dir) => visible(path.join(dir, program))).join(':')})` };
}

function checkProgram(file: string): string | { problem: string } {
  let isFile: boolean;
  try {
    isFile = statSync(file).isFile();
  } catch {
    return { problem: `program ${file} does not exist` };
  }
  if (!isFile) return { problem: `program ${file} is not a file` };
  if (!isExecutableFile(file)) return { problem: `program ${file} is not executable (chmod +x)` };
  return file;
}

function isExecutableFile(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return statSync(file).isFile();
  } catch {
    return false;
  }
}
