import { createHash, type Hash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, rm, stat } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { pathToFileURL } from 'node:url';
import type { StoredFile } from '../wire/outputs.js';

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

/** One upload a live fence answer allowed: a presigned PUT URL and the location the result names. */
export interface PresignedUpload {
  name: string;
  url: string;
  location: string;
}

/** The worker could not store an output in the object store: a Transient failure, retried as a new attempt. */
export class StorageError extends Error {
  override readonly name = 'StorageError';
  constructor(
    readonly code: 'storage_unreachable' | 'storage_refused',
    message: string,
  ) {
    super(message);
  }
}

/**
 * The object store as a worker sees it: no credential and no configuration, only the
 * presigned PUT URLs a live fence answer carried, one per output. Each file is streamed
 * from disk (never read whole into memory), with its length signed into the URL and its
 * sha256 computed on the way. An object becomes visible only once its PUT completes; a
 * result names it only after the settle that follows.
 */
export class PresignedOutputStore implements OutputStore {
  private readonly uploads: Map<string, PresignedUpload>;

  constructor(
    uploads: readonly PresignedUpload[],
    private readonly signal?: AbortSignal,
  ) {
    this.uploads = new Map(uploads.map((upload) => [upload.name, upload]));
  }

  async put(_key: AttemptKey, scratchDir: string, files: readonly string[]): Promise<Record<string, StoredFile>> {
    const stored: Record<string, StoredFile> = {};
    for (const file of files) {
      const upload = this.uploads.get(file);
      if (!upload) throw new StorageError('storage_refused', `the fence answer carried no upload URL for output ${JSON.stringify(file)}`);
      stored[file] = { location: upload.location, ...(await putFile(upload.url, join(scratchDir, file), this.signal)) };
    }
    return stored;
  }
}

async function putFile(url: string, path: string, signal?: AbortSignal): Promise<{ bytes: number; sha256: string }> {
  const { size } = await stat(path);
  const hash = createHash('sha256');
  async function* body(): AsyncGenerator<Uint8Array> {
    for await (const chunk of createReadStream(path, { highWaterMark: 1024 * 1024 })) {
      hash.update(chunk as Buffer);
      yield chunk as Buffer;
    }
  }
  let response: Response;
  try {
    response = await fetch(url, {
      method: 'PUT',
      body: body(),
      headers: { 'content-length': String(size) },
      duplex: 'half',
      ...(signal ? { signal } : {}),
    });
  } catch (error) {
    if (signal?.aborted) throw error;
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    throw new StorageError('storage_unreachable', `cannot reach the object store at ${new URL(url).host}: ${cause?.code ?? cause?.message ?? String(error)}`);
  }
  if (!response.ok) {
    const text = await response.text().catch(() => '');
    const code = /<Code>([^<]+)<\/Code>/.exec(text)?.[1];
    throw new StorageError('storage_refused', `the object store refused the upload: HTTP ${response.status}${code ? ` ${code}` : ''}`);
  }
  await response.body?.cancel().catch(() => undefined);
  return { bytes: size, sha256: hash.digest('hex') };
}
