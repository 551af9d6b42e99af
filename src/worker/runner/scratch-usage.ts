import { lstat, readdir } from 'node:fs/promises';
import path from 'node:path';

/**
 * What a job may add to its scratch folder: the reserve its worker admitted it with (the
 * job type's `outputReserveBytes`, else the worker's `--output-reserve`), over what was
 * there when it started (the inputs its worker fetched for it). Counted in bytes of file
 * content (each hard-linked file once), as the outputs the reserve is for are: a folder
 * or a small file's last block is not the job's doing. A folder the job made unreadable
 * to its worker cannot be measured and counts as over the reserve: a job has no reason to
 * hide its scratch from its worker.
 */
export class ScratchQuota {
  private constructor(
    readonly scratchDir: string,
    readonly reserveBytes: number,
    private readonly startBytes: number,
  ) {}

  /**
   * What the job adds is counted from what the scratch folder holds as it starts:
   * `startBytes` when the caller knows it (a folder it has just made, empty), else measured.
   */
  static async start(scratchDir: string, reserveBytes: number, startBytes?: number): Promise<ScratchQuota> {
    return new ScratchQuota(scratchDir, reserveBytes, startBytes ?? (await contentBytes(scratchDir)));
  }

  /** Why the job is over its reserve, if it is. */
  async exceeded(): Promise<string | undefined> {
    let added: number;
    try {
      added = (await contentBytes(this.scratchDir)) - this.startBytes;
    } catch (error) {
      return `its scratch folder could not be measured against its reserve of ${this.reserveBytes} bytes (${(error as Error).message})`;
    }
    return added > this.reserveBytes ? `it wrote ${added} bytes into its scratch folder, over its reserve of ${this.reserveBytes} bytes` : undefined;
  }
}

/** Bytes of the files under `dir`; what vanishes while it is walked is skipped, anything unreadable throws. */
export async function contentBytes(dir: string): Promise<number> {
  const seen = new Set<string>();
  let total = 0;
  const pending = [dir];
  for (let folder = pending.pop(); folder !== undefined; folder = pending.pop()) {
    let names: string[];
    try {
      names = await readdir(folder);
    } catch (error) {
      if (isGone(error) && folder !== dir) continue;
      throw error;
    }
    for (const name of names) {
      const file = path.join(folder, name);
      const stats = await lstat(file).catch((error: unknown) => {
        if (isGone(error)) return undefined;
        throw error;
      });
      if (stats === undefined) continue;
      if (stats.isDirectory()) {
        pending.push(file);
        continue;
      }
      if (stats.nlink > 1) {
        const identity = `${stats.dev}:${stats.ino}`;
        if (seen.has(identity)) continue;
        seen.add(identity);
      }
      total += stats.size;
    }
  }
  return total;
}

function isGone(error: unknown): boolean {
  return (error as NodeJS.ErrnoException).code === 'ENOENT';
}
