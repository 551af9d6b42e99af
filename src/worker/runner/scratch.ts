import { mkdir, mkdtemp, rm, rmdir } from 'node:fs/promises';
import path from 'node:path';

// The job id becomes a folder name, so it must not be able to climb out of the root.
const JOB_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$/;
const CREATE_ATTEMPTS = 3;

/**
 * Creates the scratch folder of one attempt, `<root>/<jobId>/<attempt>-<random>`, and
 * returns its absolute path. The random part means no two runs ever share a folder, not
 * even a retry of the same attempt next to the leftovers of one that crashed, so a stale
 * run cannot touch a newer one's files.
 */
export async function createScratch(root: string, jobId: string, attempt: number): Promise<string> {
  if (!JOB_ID_PATTERN.test(jobId)) {
    throw new RangeError(`createScratch: job id ${JSON.stringify(jobId)} is not safe as a folder name`);
  }
  if (!Number.isSafeInteger(attempt) || attempt < 1) {
    throw new RangeError(`createScratch: attempt must be a whole number >= 1, got ${attempt}`);
  }
  const jobDir = path.join(path.resolve(root), jobId);
  for (let tries = 1; ; tries++) {
    try {
      await mkdir(jobDir, { recursive: true });
      return await mkdtemp(path.join(jobDir, `${attempt}-`));
    } catch (error) {
      // removeScratch of another attempt of the same job may remove the job folder between
      // our mkdir and mkdtemp: make it again.
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT' || tries === CREATE_ATTEMPTS) throw error;
    }
  }
}

/**
 * Removes an attempt's scratch folder with everything in it, and the job's folder once no
 * other attempt uses it. A folder already gone is fine.
 */
export async function removeScratch(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true, maxRetries: 3 });
  try {
    await rmdir(path.dirname(dir));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'ENOTEMPTY' && code !== 'EEXIST' && code !== 'ENOENT') throw error;
  }
}
