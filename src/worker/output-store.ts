import { copyFile, mkdir, constants, stat } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import type { PresignedUpload } from '../control/protocol.js';
import { putMultipart, putWhole, StorageError, type MultipartControl } from './presigned-upload.js';

export { StorageError, UploadFencedOutError } from './presigned-upload.js';

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

/**
 * The object store as a worker sees it: no credential and no configuration, only the
 * uploads a live fence answer carried, one per output: a presigned PUT URL, or for a large
 * file a multipart upload with a URL per part, which the orchestrator completes only while
 * the lease is still live. Each file is streamed from disk (never read whole into memory),
 * with its length signed into the URLs and its sha256 computed on the way. An object
 * becomes visible only once its PUT (or the complete) succeeds; a result names it only
 * after the settle that follows.
 */
export class PresignedOutputStore implements OutputStore {
  /** sha256 (hex) and size of each stored output, by name, once stored. */
  readonly digests = new Map<string, { bytes: number; sha256: string }>();
  private readonly uploads: Map<string, PresignedUpload>;

  constructor(
    uploads: readonly PresignedUpload[],
    private readonly signal?: AbortSignal,
    private readonly hooks: {
      /** Renews and completes a multipart upload (`renew_upload`, `complete_upload`); required when the fence answer holds one. */
      multipart?: MultipartControl;
      /** Told how far the upload of all the files is, in bytes, as it goes. */
      onProgress?: (sentBytes: number, totalBytes: number) => void;
      /** This worker's clock, for when part URLs run out (default Date.now). */
      now?: () => number;
    } = {},
  ) {
    this.uploads = new Map(uploads.map((upload) => [upload.name, upload]));
  }

  async put(_key: AttemptKey, scratchDir: string, files: readonly string[]): Promise<Record<string, string>> {
    const planned = await Promise.all(
      files.map(async (file) => {
        const upload = this.uploads.get(file);
        if (!upload) throw new StorageError('storage_refused', `the fence answer carried no upload URL for output ${JSON.stringify(file)}`);
        const path = join(scratchDir, file);
        return { file, upload, path, bytes: (await stat(path)).size };
      }),
    );
    const totalBytes = planned.reduce((sum, { bytes }) => sum + bytes, 0);
    let sentBytes = 0;
    const hooks = {
      signal: this.signal,
      now: this.hooks.now,
      onBytes: (bytes: number) => {
        sentBytes += bytes;
        this.hooks.onProgress?.(sentBytes, totalBytes);
      },
    };
    const stored: Record<string, string> = {};
    for (const { file, upload, path, bytes } of planned) {
      let sha256: string;
      if ('url' in upload) {
        sha256 = await putWhole(upload.url, path, bytes, hooks);
      } else {
        if (!this.hooks.multipart)
          throw new StorageError('storage_refused', `output ${JSON.stringify(file)} is a multipart upload, and nothing here can complete it`);
        sha256 = await putMultipart(file, upload.multipart, path, this.hooks.multipart, hooks);
      }
      this.digests.set(file, { bytes, sha256 });
      stored[file] = upload.location;
    }
    return stored;
  }
}
