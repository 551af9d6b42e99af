import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { copyFile, mkdir, constants, stat } from 'node:fs/promises';
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
  /** sha256 (hex) and size of each stored output, by name, once stored. */
  readonly digests = new Map<string, { bytes: number; sha256: string }>();
  private readonly uploads: Map<string, PresignedUpload>;

  constructor(
    uploads: readonly PresignedUpload[],
    private readonly signal?: AbortSignal,
  ) {
    this.uploads = new Map(uploads.map((upload) => [upload.name, upload]));
  }

  async put(_key: AttemptKey, scratchDir: string, files: readonly string[]): Promise<Record<string, string>> {
    const stored: Record<string, string> = {};
    for (const file of files) {
      const upload = this.uploads.get(file);
      if (!upload) throw new StorageError('storage_refused', `the fence answer carried no upload URL for output ${JSON.stringify(file)}`);
      this.digests.set(file, await putFile(upload.url, join(scratchDir, file), this.signal));
      stored[file] = upload.location;
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
