import { createHash, type Hash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, rm, stat } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { pathToFileURL } from 'node:url';
import type { PresignedUpload } from '../control/protocol.js';
import type { StoredFile } from '../wire/outputs.js';
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
  /**
   * Copies `files` (paths inside `scratchDir`) and returns, by name, where each was stored
   * (a URL: `file://` or `s3://`), its size and the sha256 of the bytes stored, computed on the way.
   */
  put(key: AttemptKey, scratchDir: string, files: readonly string[]): Promise<Record<string, StoredFile>>;
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

  async put(key: AttemptKey, scratchDir: string, files: readonly string[]): Promise<Record<string, StoredFile>> {
    const dir = this.locationOf(key);
    await mkdir(dir, { recursive: true });
    const stored: Record<string, StoredFile> = {};
    for (const file of files) {
      const target = join(dir, file);
      await mkdir(dirname(target), { recursive: true });
      const hash = createHash('sha256');
      let bytes = 0;
      try {
        // 'wx': within an attempt's own folder nothing may be replaced either.
        await pipeline(
          createReadStream(join(scratchDir, file)),
          hashing(hash, (n) => (bytes += n)),
          createWriteStream(target, { flags: 'wx' }),
        );
      } catch (error) {
        // A copy that failed part-way leaves no partial file (one that was there before stays).
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') await rm(target, { force: true });
        throw error;
      }
      stored[file] = { location: pathToFileURL(target).href, bytes, sha256: hash.digest('hex') };
    }
    return stored;
  }
}

/** A pipeline step that passes chunks through, feeding them to `hash` and counting their bytes. */
function hashing(hash: Hash, counted: (bytes: number) => void): (chunks: AsyncIterable<Buffer>) => AsyncGenerator<Buffer> {
  return async function* (chunks) {
    for await (const chunk of chunks) {
      hash.update(chunk);
      counted(chunk.length);
      yield chunk;
    }
  };
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

  async put(_key: AttemptKey, scratchDir: string, files: readonly string[]): Promise<Record<string, StoredFile>> {
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
    const stored: Record<string, StoredFile> = {};
    for (const { file, upload, path, bytes } of planned) {
      let sha256: string;
      if ('url' in upload) {
        sha256 = await putWhole(upload.url, path, bytes, hooks);
      } else {
        if (!this.hooks.multipart)
          throw new StorageError('storage_refused', `output ${JSON.stringify(file)} is a multipart upload, and nothing here can complete it`);
        sha256 = await putMultipart(file, upload.multipart, path, this.hooks.multipart, hooks);
      }
      stored[file] = { location: upload.location, bytes, sha256 };
    }
    return stored;
  }
}
