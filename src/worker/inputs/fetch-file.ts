import { createWriteStream } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { isJobError, PermanentError, TransientError, type JobError } from '../../core/errors.js';

export interface FetchFileOptions {
  /** What errors name: the URL as the job gave it (an `s3://` location, never the presigned URL, which is a credential). */
  label: string;
  /** More bytes than this fail the fetch (Permanent `input_too_large`). */
  maxBytes: number;
  /** No byte (nor the response's head) for this long: the fetch fails Transient `input_unreachable`. */
  idleTimeoutMs: number;
  /** Aborts the fetch (the lease was lost, the worker stops): the signal's reason is thrown. */
  signal: AbortSignal;
}

/**
 * Streams a URL into `target` (never the whole file in memory), counting its bytes
 * against the cap on the way. The file appears under its name only once complete: it is
 * written to `<target>.part` and renamed, and a failed fetch leaves nothing behind.
 *
 * Failures are the job's errors: a missing object (404, 410) is Permanent `input_missing`;
 * one over the cap is Permanent `input_too_large` (refused on its Content-Length before
 * any byte is read when it says so); a refusal (401, 403, another 4xx) is Permanent
 * `input_refused`; a server that cannot be reached, stalls, or answers 408, 429 or 5xx is
 * Transient `input_unreachable`, retried as the next attempt.
 */
export async function fetchFile(url: string, target: string, options: FetchFileOptions): Promise<{ bytes: number }> {
  const { label, maxBytes, idleTimeoutMs, signal } = options;
  const idle = new AbortController();
  let idleTimer: NodeJS.Timeout | undefined;
  const stillAlive = (): void => {
    clearTimeout(idleTimer);
    idleTimer = setTimeout(() => idle.abort(), idleTimeoutMs);
  };
  const combined = AbortSignal.any([signal, idle.signal]);
  const part = `${target}.part`;
  let bytes = 0;
  try {
    stillAlive();
    let response: Response;
    try {
      response = await fetch(url, { signal: combined, redirect: 'follow' });
    } catch (error) {
      throw unreachable(error);
    }
    if (!response.ok || !response.body) {
      await response.body?.cancel().catch(() => undefined);
      throw refusal(label, response.status);
    }
    const declared = Number(response.headers.get('content-length') ?? Number.NaN);
    if (declared > maxBytes) {
      await response.body.cancel().catch(() => undefined);
      throw tooLarge(label, maxBytes, `it is ${declared} bytes`);
    }
    const counter = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        stillAlive();
        bytes += chunk.length;
        if (bytes > maxBytes) done(tooLarge(label, maxBytes, 'more bytes came'));
        else done(null, chunk);
      },
    });
    try {
      await pipeline(Readable.fromWeb(response.body as WebReadableStream<Uint8Array>), counter, createWriteStream(part, { flags: 'wx' }), { signal: combined });
    } catch (error) {
      if (isJobError(error)) throw error;
      throw unreachable(error);
    }
    await rename(part, target);
    return { bytes };
  } catch (error) {
    await rm(part, { force: true }).catch(() => undefined);
    throw error;
  } finally {
    clearTimeout(idleTimer);
  }

  function unreachable(error: unknown): unknown {
    if (signal.aborted) return signal.reason;
    if (idle.signal.aborted) return new TransientError('input_unreachable', `input ${label}: nothing came for ${idleTimeoutMs} ms`);
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    const why = cause?.code ?? cause?.message ?? (error instanceof Error ? error.message : String(error));
    return new TransientError('input_unreachable', `input ${label} cannot be fetched: ${why}`);
  }
}

function refusal(label: string, status: number): JobError {
  if (status === 404 || status === 410) return new PermanentError('input_missing', `input ${label} does not exist (HTTP ${status})`);
  if (status === 408 || status === 429 || status >= 500)
    return new TransientError('input_unreachable', `input ${label} cannot be fetched now (HTTP ${status})`);
  return new PermanentError('input_refused', `input ${label} was refused (HTTP ${status})`);
}

function tooLarge(label: string, maxBytes: number, detail: string): JobError {
  return new PermanentError('input_too_large', `input ${label} is larger than the ${maxBytes}-byte cap on inputs (${detail})`);
}
