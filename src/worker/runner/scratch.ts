import { mkdir, mkdtemp, rm, rmdir } from 'node:fs/promises';
import path from 'node:path';

// The job id becomes part of a folder name, so it must not be able to climb out of the root.
const JOB_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$/;

/**
 * Creates the scratch folder of one attempt, `<root>/<jobId>.<attempt>-<random>`, and
 * returns its absolute path. The random part means no two runs ever share a folder, not
 * even a retry of the same attempt next to the leftovers of one that crashed, so a stale
 * run cannot touch a newer one's files. One level under the root, so making it is one
 * system call (the root is made once, when missing): on a busy worker these folder
 * operations were a tenth of its CPU per short job.
 */
export async function createScratch(root: string, jobId: string, attempt: number): Promise<string> {
  if (!JOB_ID_PATTERN.test(jobId)) {
    throw new RangeError(`createScratch: job id ${JSON.stringify(jobId)} is not safe as a folder name`);
  }
  if (!Number.isSafeInteger(attempt) || attempt < 1) {
    throw new RangeError(`createScratch: attempt must be a whole number >= 1, got ${attempt}`);
  }
  const prefix = path.join(path.resolve(root), `${jobId}.${attempt}-`);
  try {
    return await mkdtemp(prefix);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    await mkdir(path.dirname(prefix), { recursive: true });
    return await mkdtemp(prefix);
  }
}

/**
 * Removes an attempt's scratch folder with everything in it. A folder already gone is
 * fine. Most jobs leave it empty (their outputs were copied out), so one rmdir is tried
 * before walking the tree.
 */
export async function removeScratch(dir: string): Promise<void> {
  try {
    await rmdir(dir);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return;
    if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw error;
    await rm(dir, { recursive: true, force: true, maxRetries: 3 });
  }
}
