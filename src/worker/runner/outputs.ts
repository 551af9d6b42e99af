import { lstat, realpath } from 'node:fs/promises';
import path from 'node:path';
import { PermanentError, type SerializedError } from '../../core/errors.js';

/**
 * Checks every output a job named: a relative path that stays inside the scratch folder,
 * even after following symbolic links, and names an existing regular file. The worker
 * stores exactly these files, so a job must not be able to point it anywhere else.
 * Returns a permanent `invalid_output` error naming the first bad output, or undefined.
 */
export async function findInvalidOutput(scratchDir: string, outputs: string[]): Promise<SerializedError | undefined> {
  if (outputs.length === 0) return undefined;
  const scratchRoot = await realpath(scratchDir);
  const seen = new Set<string>();
  for (const output of outputs) {
    const problem = await findProblem(scratchRoot, output, seen);
    if (problem !== undefined) {
      return new PermanentError('invalid_output', `output ${JSON.stringify(output)} ${problem}`).toJSON();
    }
  }
  return undefined;
}

async function findProblem(scratchRoot: string, output: string, seen: Set<string>): Promise<string | undefined> {
  if (output === '') return 'is an empty name';
  if (path.isAbsolute(output)) return 'is an absolute path; outputs are named relative to the scratch folder';
  const normalized = path.normalize(output);
  if (normalized === '..' || normalized.startsWith(`..${path.sep}`)) return 'points outside the scratch folder';
  if (seen.has(normalized)) return 'is listed twice';
  seen.add(normalized);

  const candidate = path.join(scratchRoot, normalized);
  let stats;
  try {
    stats = await lstat(candidate);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT' || (error as NodeJS.ErrnoException).code === 'ENOTDIR') {
      return 'does not exist in the scratch folder';
    }
    throw error;
  }
  // A link could be re-pointed between this check and the upload, so only real files pass.
  if (stats.isSymbolicLink()) return 'is a symbolic link, not a regular file';
  if (!stats.isFile()) return stats.isDirectory() ? 'is a directory, not a regular file' : 'is not a regular file';
  // A parent folder inside the scratch folder may itself be a link to elsewhere.
  if (!(await realpath(candidate)).startsWith(scratchRoot + path.sep)) return 'resolves to a file outside the scratch folder';
  return undefined;
}
