import { copyFile, mkdir, constants } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';

export interface AttemptKey {
  tenant: string;
  jobId: string;
  attempt: number;
}

/**
 * Where job outputs go once an attempt has passed its fence. Locations are scoped to
 * (job, attempt): a late attempt that slipped past the fence writes where nobody reads,
 * and can never overwrite the settled attempt's files.
 */
export interface OutputStore {
  /** Copies `files` (paths inside `scratchDir`) and returns name -> stored location. */
  put(key: AttemptKey, scratchDir: string, files: readonly string[]): Promise<Record<string, string>>;
}

/** The default store: a directory, laid out as `<root>/<tenant>/<job>/<attempt>/<file>`. */
export class DirectoryOutputStore implements OutputStore {
  readonly root: string;

  constructor(root: string) {
    this.root = resolve(root);
  }

  locationOf(key: AttemptKey): string {
    return join(this.root, key.tenant, key.jobId, String(key.attempt));
  }

  async put(key: AttemptKey, scratchDir: string, files: readonly string[]): Promise<Record<string, string>> {
    const dir = this.locationOf(key);
    await mkdir(dir, { recursive: true });
    const stored: Record<string, string> = {};
    for (const file of files) {
      const target = join(dir, file);
      await mkdir(dirname(target), { recursive: true });
      // COPYFILE_EXCL: within an attempt's own folder nothing may be replaced either.
      await copyFile(join(scratchDir, file), target, constants.COPYFILE_EXCL);
      stored[file] = target;
    }
    return stored;
  }
}
