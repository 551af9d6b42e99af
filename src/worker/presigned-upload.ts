import { createHash, type Hash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import type { CompleteUploadReply, PresignedPart, RenewUploadReply } from '../control/protocol.js';
import type { LeaseLoss } from '../ledger/ledger.js';

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
 * The orchestrator refused to renew or complete a multipart upload: the lease is no longer
 * this attempt's (and the upload was aborted). The attempt ends as after a refused fence.
 */
export class UploadFencedOutError extends Error {
  override readonly name = 'UploadFencedOutError';
  constructor(readonly reason: LeaseLoss) {
    super(`the orchestrator refused to go on with the upload: the lease is ${reason}`);
  }
}

/** Asks the orchestrator to complete a multipart upload once every part is up. */
export type CompleteUpload = (name: string, uploadId: string, parts: Array<{ partNumber: number; etag: string }>) => Promise<CompleteUploadReply>;

/** Asks the orchestrator for fresh URLs for the parts of a multipart upload still to go. */
export type RenewUpload = (name: string, uploadId: string, parts: Array<Omit<PresignedPart, 'url'>>) => Promise<RenewUploadReply>;

/** What a multipart upload needs of the control plane: its complete, and fresh part URLs for a long upload. */
export interface MultipartControl {
  complete: CompleteUpload;
  renew: RenewUpload;
}

/** How an upload runs: aborted with the lease, told of every chunk sent (for progress). */
export interface UploadHooks {
  signal?: AbortSignal | undefined;
  /** `bytes` more of the file were read and sent. */
  onBytes?: ((bytes: number) => void) | undefined;
  /** This worker's clock (default Date.now): when the part URLs were received, and when they run out. */
  now?: (() => number) | undefined;
}

/** Streams a whole file with one presigned PUT (its length is signed into the URL), hashing it on the way. */
export async function putWhole(url: string, path: string, bytes: number, hooks: UploadHooks): Promise<string> {
  const hash = createHash('sha256');
  await putRange(url, path, { start: 0, end: bytes - 1 }, hash, hooks);
  return hash.digest('hex');
}

/**
 * Streams a file part after part, each from disk with its own presigned UploadPart URL,
 * feeding the whole file's sha256 in order; then asks the orchestrator to complete the
 * upload with the parts' ETags. Only a chunk or two of the file is in memory at a time.
 */
export async function putMultipart(
  name: string,
  multipart: { uploadId: string; parts: readonly PresignedPart[]; validForMs: number },
  path: string,
  control: MultipartControl,
  hooks: UploadHooks,
): Promise<string> {
  const now = hooks.now ?? Date.now;
  const hash = createHash('sha256');
  const etags: Array<{ partNumber: number; etag: string }> = [];
  const parts = [...multipart.parts].sort((a, b) => a.start - b.start);
  // The URLs work for validForMs from when the answer left; past half of that, the parts
  // still to go get fresh ones first, so no part starts on a URL about to run out.
  let renewAt = now() + multipart.validForMs / 2;
  for (let index = 0; index < parts.length; index++) {
    if (now() >= renewAt) {
      const reply = await control.renew(
        name,
        multipart.uploadId,
        parts.slice(index).map(({ partNumber, start, end }) => ({ partNumber, start, end })),
      );
      if (!reply.live) throw new UploadFencedOutError(reply.reason);
      parts.splice(index, reply.parts.length, ...[...reply.parts].sort((a, b) => a.start - b.start));
      renewAt = now() + reply.validForMs / 2;
    }
    const part = parts[index]!;
    const etag = await putRange(part.url, path, part, hash, hooks);
    if (!etag) throw new StorageError('storage_refused', `the object store stored part ${part.partNumber} of ${JSON.stringify(name)} without an ETag`);
    etags.push({ partNumber: part.partNumber, etag });
  }
  const reply = await control.complete(name, multipart.uploadId, etags);
  if (!reply.live) throw new UploadFencedOutError(reply.reason);
  if (reply.storeError) throw new StorageError('storage_refused', reply.storeError);
  return hash.digest('hex');
}

/** PUTs the file's bytes `start`..`end` (inclusive; none when end < start) and answers the ETag the store gave. */
async function putRange(url: string, path: string, range: { start: number; end: number }, hash: Hash, hooks: UploadHooks): Promise<string | null> {
  const length = range.end - range.start + 1;
  async function* body(): AsyncGenerator<Uint8Array> {
    if (length <= 0) return;
    for await (const chunk of createReadStream(path, { start: range.start, end: range.end, highWaterMark: 1024 * 1024 })) {
      hash.update(chunk as Buffer);
      hooks.onBytes?.((chunk as Buffer).length);
      yield chunk as Buffer;
    }
  }
  let response: Response;
  try {
    response = await fetch(url, {
      method: 'PUT',
      body: body(),
      headers: { 'content-length': String(Math.max(0, length)) },
      duplex: 'half',
      ...(hooks.signal ? { signal: hooks.signal } : {}),
    });
  } catch (error) {
    if (hooks.signal?.aborted) throw error;
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    throw new StorageError('storage_unreachable', `cannot reach the object store at ${new URL(url).host}: ${cause?.code ?? cause?.message ?? String(error)}`);
  }
  if (!response.ok) {
    const text = await response.text().catch(() => '');
    const code = /<Code>([^<]+)<\/Code>/.exec(text)?.[1];
    throw new StorageError('storage_refused', `the object store refused the upload: HTTP ${response.status}${code ? ` ${code}` : ''}`);
  }
  await response.body?.cancel().catch(() => undefined);
  return response.headers.get('etag');
}
