import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, rename, rm, stat } from 'node:fs/promises';
import { basename, dirname, resolve, sep } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import type { SubmittedBatch } from '../wire/jobs.js';
import type { LogLine } from '../wire/logs.js';
import type { UploadGrant } from '../wire/uploads.js';
import { ApiErrorCode, isPlanrunApiError, PlanrunApiError } from './errors.js';
import { parseEventStream, type ServerSentEvent } from './sse.js';
import {
  isTerminalState,
  type BulkRetryAnswer,
  type ClientOptions,
  type EventsOptions,
  type FailedJobsFilter,
  type FailureGroupView,
  type FailuresView,
  type FleetView,
  type JobEvent,
  type JobPage,
  type JobSubmission,
  type JobSummary,
  type JobView,
  type ListOptions,
  type LogsOptions,
  type OutputFile,
  type ReconnectOptions,
  type RetriedJobView,
  type SubmitOptions,
  type SubmittedJob,
  type TerminalJobView,
  type WaitOptions,
} from './types.js';

/** How what arrived differs from what the result names (size first, then sha256), or undefined when it does not. */
function outputMismatch(expected: OutputFile | undefined, got: { bytes: number; sha256: string }): { expected: string; got: string } | undefined {
  if (expected?.bytes !== undefined && expected.bytes !== got.bytes) return { expected: `${expected.bytes} bytes`, got: `${got.bytes} bytes` };
  if (expected?.sha256 !== undefined && expected.sha256 !== got.sha256) return { expected: `sha256 ${expected.sha256}`, got: `sha256 ${got.sha256}` };
  return undefined;
}

/** `wait` stops reopening a stream that failed this many times in a row without an event, and polls. */
const maxStreamFailures = 3;

const defaultReconnect: ReconnectOptions = { initialDelayMs: 250, maxDelayMs: 2_000, giveUpAfterMs: 30_000, idleTimeoutMs: 60_000 };

interface RequestOptions {
  body?: unknown;
  headers?: Record<string, string>;
  signal?: AbortSignal | undefined;
  redirect?: 'follow' | 'manual';
}

/** One output `download` wrote. */
export interface DownloadedOutput {
  name: string;
  /** Where it was written. */
  path: string;
  bytes: number;
  /** Of the bytes written, hex. */
  sha256: string;
  /** Its size and sha256 were checked against the result's; false only for a result stored before planrun recorded them. */
  verified: boolean;
}

/** A file `upload` put in the object store. */
export interface UploadedFile {
  /** `s3://…`: what a job's input names it by (e.g. transcode's `source`). */
  location: string;
  bytes: number;
}

export interface UploadOptions {
  /** Called as bytes go out: `sent` of `total`. */
  onProgress?: (sent: number, total: number) => void;
  signal?: AbortSignal;
}

/**
 * The typed client of planrun's HTTP API.
 *
 * ```ts
 * const client = new Client({ url: 'http://127.0.0.1:7700', key: process.env.PLANRUN_KEY! });
 * const { id } = await client.submit('transcode', { source: 'in.mp4' }, { idempotencyKey: 'order-42' });
 * const job = await client.wait(id);
 * if (job.state === 'failed') console.error(job.error?.code, job.error?.message);
 * ```
 *
 * Every failure is a PlanrunApiError: branch on its `code` (`not_found`, `unauthorized`,
 * `unreachable`...).
 */
export class Client {
  readonly url: string;
  private readonly key: string;
  private readonly fetch: typeof fetch;
  private readonly timeoutMs: number;
  private readonly reconnect: ReconnectOptions;

  constructor(options: ClientOptions) {
    let base: URL;
    try {
      base = new URL(options.url);
    } catch {
      throw new TypeError(`planrun client: "${options.url}" is not a URL (expected something like http://127.0.0.1:7700)`);
    }
    if (base.protocol !== 'http:' && base.protocol !== 'https:') {
      throw new TypeError(`planrun client: "${options.url}" is not an http(s) URL`);
    }
    if (typeof options.key !== 'string' || options.key.length === 0) throw new TypeError('planrun client: an API key is required');
    this.url = base.href.replace(/\/+$/, '');
    this.key = options.key;
    this.fetch = options.fetch ?? globalThis.fetch;
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.reconnect = { ...defaultReconnect, ...options.reconnect };
  }

  /** The API URL of one output of a job (`GET /v1/jobs/:id/outputs/:name`; it needs the key). */
  outputUrl(id: string, name: string): string {
    return `${this.url}/v1/jobs/${encodeURIComponent(id)}/outputs/${name.split('/').map(encodeURIComponent).join('/')}`;
  }

  /**
   * The bytes of one output: the API streams a folder-store file itself, and answers a
   * 302 to a short-lived presigned URL for an object store, which is followed without the
   * API key (the key never goes to the store).
   */
  async openOutput(id: string, name: string, options: { signal?: AbortSignal } = {}): Promise<ReadableStream<Uint8Array>> {
    const path = this.outputUrl(id, name).slice(this.url.length);
    const response = await this.send('GET', path, { signal: options.signal, redirect: 'manual' }, async (r) => r);
    let body = response;
    if (response.status >= 300 && response.status < 400) {
      const location = response.headers.get('location');
      await response.body?.cancel().catch(() => undefined);
      if (!location) throw this.invalidResponse(path, `a ${response.status} without a Location`);
      try {
        body = await this.fetch(location, { ...(options.signal ? { signal: options.signal } : {}) });
      } catch (error) {
        const cause = (error as { cause?: { code?: string } })?.cause;
        throw new PlanrunApiError({
          status: 0,
          code: ApiErrorCode.unreachable,
          message: `cannot reach the object store at ${new URL(location).host} (${cause?.code ?? String(error)})`,
          url: new URL(location).origin,
          cause: error,
        });
      }
      if (!body.ok) {
        await body.body?.cancel().catch(() => undefined);
        throw new PlanrunApiError({
          status: body.status,
          code: ApiErrorCode.notFound,
          message: `the object store answered HTTP ${body.status} for output ${name}`,
          url: new URL(location).origin,
        });
      }
    }
    if (!body.body) throw this.invalidResponse(path, 'no body');
    return body.body;
  }

  /**
   * Writes every output of a finished job into `outDir` (default: the current folder),
   * each under its own name, streaming (no output is held in memory), and says what it
   * wrote with each file's sha256. A file is written under a temporary name and renamed
   * only once its size and sha256 are the ones the result names (`outputFiles`; a result
   * stored before planrun recorded them has none to check). A mismatch deletes the
   * partial file and fails with code `output_mismatch`, naming the output, what the result
   * names and what arrived.
   */
  async download(id: string, options: { outDir?: string; signal?: AbortSignal } = {}): Promise<DownloadedOutput[]> {
    const job = await this.get(id, options);
    if (job.state !== 'finished') {
      throw new PlanrunApiError({
        status: 409,
        code: ApiErrorCode.conflict,
        message: `job ${id} is ${job.state}, not finished: it has no outputs`,
        url: `${this.url}/v1/jobs/${id}`,
      });
    }
    const outDir = resolve(options.outDir ?? '.');
    const written: DownloadedOutput[] = [];
    for (const name of Object.keys(job.result?.outputs ?? {})) {
      const target = resolve(outDir, name);
      if (!target.startsWith(outDir + sep)) throw this.invalidResponse(`/v1/jobs/${id}`, `output name ${JSON.stringify(name)} leads outside ${outDir}`);
      // A server that names outputFiles names every output there (an older one names none: nothing to check against).
      const files = job.result?.outputFiles;
      const expected = files !== undefined && Object.hasOwn(files, name) ? files[name] : undefined;
      if (files !== undefined && expected === undefined)
        throw this.invalidResponse(`/v1/jobs/${id}`, `the result's outputFiles do not name output ${JSON.stringify(name)}`);
      await mkdir(dirname(target), { recursive: true });
      const stream = await this.openOutput(id, name, options);
      const hash = createHash('sha256');
      let bytes = 0;
      const partial = `${target}.partial-${process.pid}`;
      try {
        await pipeline(
          Readable.fromWeb(stream),
          async function* (chunks: AsyncIterable<Buffer>) {
            for await (const chunk of chunks) {
              hash.update(chunk);
              bytes += chunk.length;
              yield chunk;
            }
          },
          createWriteStream(partial),
        );
        const got = { bytes, sha256: hash.digest('hex') };
        const mismatch = outputMismatch(expected, got);
        if (mismatch) {
          throw new PlanrunApiError({
            status: 0,
            code: ApiErrorCode.outputMismatch,
            message: `output ${JSON.stringify(name)} of job ${id} is not what its result names: expected ${mismatch.expected}, got ${mismatch.got}; nothing was kept`,
            url: this.outputUrl(id, name),
          });
        }
        await rename(partial, target);
        written.push({ name, path: target, ...got, verified: expected?.sha256 !== undefined });
      } catch (error) {
        await rm(partial, { force: true });
        throw error;
      }
    }
    return written;
  }

  /**
   * Uploads a local file to the orchestrator's object store (`POST /v1/uploads`, then a
   * PUT to the presigned URL it answers, streamed from disk, without the API key) and
   * returns the `s3://` location a job's input names it by. An orchestrator without an
   * object store answers `no_object_store`.
   */
  async upload(path: string, options: UploadOptions = {}): Promise<UploadedFile> {
    const { size } = await stat(path);
    const grant = await this.request<UploadGrant>('POST', '/v1/uploads', { body: { name: basename(path), bytes: size }, signal: options.signal });
    const store = new URL(grant.url);
    let sent = 0;
    async function* body(): AsyncGenerator<Buffer> {
      for await (const chunk of createReadStream(path, { highWaterMark: 1024 * 1024 })) {
        sent += (chunk as Buffer).length;
        yield chunk as Buffer;
        options.onProgress?.(sent, size);
      }
    }
    let response: Response;
    try {
      response = await this.fetch(grant.url, {
        method: 'PUT',
        body: body(),
        headers: { 'content-length': String(size) },
        duplex: 'half',
        ...(options.signal ? { signal: options.signal } : {}),
      });
    } catch (error) {
      if (options.signal?.aborted) throw options.signal.reason;
      const cause = (error as { cause?: { code?: string } })?.cause;
      throw new PlanrunApiError({
        status: 0,
        code: ApiErrorCode.unreachable,
        message: `cannot reach the object store at ${store.host} (${cause?.code ?? String(error)})`,
        url: store.origin,
        cause: error,
      });
    }
    if (!response.ok) {
      const text = await response.text().catch(() => '');
      const code = /<Code>([^<]+)<\/Code>/.exec(text)?.[1];
      throw new PlanrunApiError({
        status: response.status,
        code: ApiErrorCode.unavailable,
        message: `the object store refused the upload of ${path}: HTTP ${response.status}${code ? ` ${code}` : ''}`,
        url: store.origin,
      });
    }
    await response.body?.cancel().catch(() => undefined);
    return { location: grant.location, bytes: size };
  }

  /** Submits one job. The same `idempotencyKey` always answers with the same job. */
  async submit(type: string, input: unknown, options: SubmitOptions = {}): Promise<SubmittedJob> {
    const headers: Record<string, string> = {};
    // The server reads the key's bytes as UTF-8; fetch sends a header's characters as
    // single bytes (latin1), so the UTF-8 bytes go in one character each.
    if (options.idempotencyKey !== undefined) headers['idempotency-key'] = Buffer.from(options.idempotencyKey, 'utf8').toString('latin1');
    return this.request<SubmittedJob>('POST', '/v1/jobs', {
      body: { type, input, ...submissionOptions(options) },
      headers,
    });
  }

  /**
   * Submits many jobs in one request and one ledger transaction; one answer per job, in
   * the order given. One invalid submission refuses the whole batch (`invalid_request`).
   */
  async submitMany(jobs: JobSubmission[]): Promise<SubmittedJob[]> {
    const answer = await this.request<SubmittedBatch>('POST', '/v1/jobs/batch', {
      body: {
        jobs: jobs.map((job) => ({
          type: job.type,
          input: job.input,
          ...submissionOptions(job),
          idempotencyKey: job.idempotencyKey,
        })),
      },
    });
    if (!Array.isArray(answer?.jobs)) throw this.invalidResponse('/v1/jobs/batch', 'the batch answer has no jobs list');
    return answer.jobs;
  }

  async get(id: string, options: { signal?: AbortSignal } = {}): Promise<JobView> {
    return this.request<JobView>('GET', jobPath(id), { signal: options.signal });
  }

  /** One page of the tenant's jobs, newest first; pass `nextCursor` back for the next page. */
  async list(options: ListOptions = {}): Promise<JobPage> {
    const query = new URLSearchParams();
    if (options.state !== undefined) query.set('state', options.state);
    if (options.type !== undefined) query.set('type', options.type);
    if (options.cursor !== undefined) query.set('cursor', options.cursor);
    if (options.limit !== undefined) query.set('limit', String(options.limit));
    const search = query.size > 0 ? `?${query.toString()}` : '';
    const page = await this.request<JobPage>('GET', `/v1/jobs${search}`);
    if (!Array.isArray(page?.jobs)) throw this.invalidResponse('/v1/jobs', 'the job list has no jobs');
    return { jobs: page.jobs, nextCursor: page.nextCursor ?? null };
  }

  /** Cancels a job: at once when queued, at its worker's next heartbeat when running. */
  async cancel(id: string): Promise<JobView> {
    return this.request<JobView>('POST', `${jobPath(id)}/cancel`);
  }

  /**
   * Retries a failed (or cancelled) job as a new job, linked to it (`retryOf`); a job
   * retried before answers the job its first retry made (`created: false`). A job that
   * did not fail is refused with code `not_failed`.
   */
  async retry(id: string): Promise<RetriedJobView> {
    return this.request<RetriedJobView>('POST', `${jobPath(id)}/retry`);
  }

  /**
   * Retries every failed job (not retried yet, not cancelled) that matches every filter
   * given; answers how many, and the jobs made. An admin key may name a `tenant` (else every tenant's).
   */
  async retryFailed(filter: FailedJobsFilter = {}): Promise<BulkRetryAnswer> {
    const answer = await this.request<BulkRetryAnswer>('POST', '/v1/jobs/retry', {
      body: { type: filter.type, code: filter.code, tenant: filter.tenant, ...timeRange(filter) },
    });
    if (!Array.isArray(answer?.jobs)) throw this.invalidResponse('/v1/jobs/retry', 'the answer has no jobs list');
    return answer;
  }

  /** The holding area: failed jobs not retried yet, grouped by (type, error code), largest group first. */
  async failures(filter: Omit<FailedJobsFilter, 'type' | 'code'> = {}): Promise<FailureGroupView[]> {
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries({ ...timeRange(filter), tenant: filter.tenant })) if (value !== undefined) query.set(name, value);
    const search = query.size > 0 ? `?${query.toString()}` : '';
    const answer = await this.request<FailuresView>('GET', `/v1/failures${search}`);
    if (!Array.isArray(answer?.groups)) throw this.invalidResponse('/v1/failures', 'the answer has no groups');
    return answer.groups;
  }

  /** The workers the orchestrator has heard from lately. */
  async fleet(): Promise<FleetView> {
    return this.request<FleetView>('GET', '/v1/fleet');
  }

  /**
   * The job's events as they happen: state changes and progress, ending with the
   * terminal state (at once if the job already ended). A connection that drops before
   * then is reopened; the iterator fails only if the API refuses (e.g. `not_found`) or
   * stays unreachable for the reconnect policy's `giveUpAfterMs`.
   */
  async *events(id: string, options: EventsOptions = {}): AsyncGenerator<JobEvent> {
    const unreachableSince = new Backoff(this.reconnect);
    let lastEventId: string | undefined;
    let previous: string | undefined;
    for (;;) {
      let retryMs: number | undefined;
      try {
        for await (const sse of this.openStream(`${jobPath(id)}/events`, lastEventId, options.signal)) {
          unreachableSince.reset();
          lastEventId = sse.id ?? lastEventId;
          retryMs = sse.retry ?? retryMs;
          const event = toJobEvent(sse);
          if (!event) continue;
          // A reconnect replays the job's current state; do not repeat what was just said.
          const fingerprint = `${sse.event}\n${sse.data}`;
          if (fingerprint === previous) continue;
          previous = fingerprint;
          yield event;
          if (event.type === 'state' && isTerminalState(event.job.state)) return;
        }
      } catch (error) {
        if (options.signal?.aborted) throw options.signal.reason;
        if (!isRetryable(error)) throw error;
        unreachableSince.fail(error);
      }
      await pause(retryMs ?? unreachableSince.nextDelay(), options.signal);
    }
  }

  /**
   * Resolves when the job has ended, with its final view (result or error, attempts).
   * Follows the event stream; when the stream drops it polls, and reopens the stream
   * (giving up on it after three failures in a row, polling alone). Never resolves
   * with a job that has not ended: a `timeoutMs` that passes first fails with code
   * `timeout`, an aborted `signal` with its reason.
   */
  async wait(id: string, options: WaitOptions = {}): Promise<TerminalJobView> {
    const timeout = options.timeoutMs === undefined ? undefined : AbortSignal.timeout(options.timeoutMs);
    const signals = [options.signal, timeout].filter((s): s is AbortSignal => s !== undefined);
    const signal = signals.length === 0 ? undefined : signals.length === 1 ? signals[0] : AbortSignal.any(signals);
    let last: JobSummary | undefined;
    const onAbort = (error: unknown): never => {
      if (options.signal?.aborted) throw options.signal.reason;
      if (timeout?.aborted) {
        throw new PlanrunApiError({
          status: 0,
          code: ApiErrorCode.timeout,
          message: `job ${id} did not end within ${options.timeoutMs} ms${last ? ` (last seen ${last.state}, attempt ${last.attempt})` : ''}`,
          url: `${this.url}${jobPath(id)}`,
        });
      }
      throw error;
    };
    const tell = (event: JobEvent | undefined) => {
      if (!event) return;
      last = event.job;
      options.onEvent?.(event);
    };
    try {
      const polls = new Backoff(this.reconnect);
      let streamFailures = 0;
      let ended = false;
      for (;;) {
        // The stream first. When it drops, one poll says where the job stands, then the
        // stream is tried again; after three failures in a row without an event, polls alone.
        if (!ended && streamFailures < maxStreamFailures) {
          let heard = false;
          try {
            for await (const sse of this.openStream(`${jobPath(id)}/events`, undefined, signal)) {
              const event = toJobEvent(sse);
              if (!event) continue;
              heard = true;
              // A reopened stream starts with the state already seen: tell only what changed.
              tell(change(last, event.job) && event);
              if (isTerminalState(event.job.state)) {
                ended = true;
                break;
              }
            }
          } catch (error) {
            if (signal?.aborted || !isRetryable(error)) throw error;
          }
          streamFailures = heard ? 0 : streamFailures + 1;
        }
        // The final view comes from a read, which has the attempts the events leave out.
        try {
          const job = await this.get(id, { signal });
          polls.succeeded();
          tell(change(last, job));
          if (isTerminalState(job.state)) return job as TerminalJobView;
        } catch (error) {
          if (signal?.aborted || !isRetryable(error)) throw error;
          polls.fail(error);
        }
        await pause(polls.nextDelay(), signal);
      }
    } catch (error) {
      return onAbort(error);
    }
  }

  /**
   * What attempt `attempt` of the job printed and logged (default: its latest attempt), as
   * the orchestrator keeps it: its first 64 KiB, a `planrun` line saying what was dropped
   * (if anything was), and its last 1 MiB.
   */
  async logs(id: string, options: LogsOptions = {}): Promise<LogLine[]> {
    const path = `${jobPath(id)}/attempts/${await this.attemptOf(id, options)}/logs`;
    const text = await this.send('GET', path, { signal: options.signal }, async (response) => response.text());
    try {
      return text
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as LogLine);
    } catch {
      throw this.invalidResponse(path, `expected JSON lines, got ${JSON.stringify(text.slice(0, 80))}`);
    }
  }

  /**
   * The attempt's log as it is written: the lines kept so far, then each new one, until
   * the attempt ends (at once if it has ended). An attempt not started yet (the job is
   * queued for it) is waited for. Fails if the connection drops before the end.
   */
  async *followLogs(id: string, options: LogsOptions = {}): AsyncGenerator<LogLine> {
    const path = `${jobPath(id)}/attempts/${await this.attemptOf(id, options)}/logs?follow=1`;
    for await (const sse of this.openStream(path, undefined, options.signal)) {
      if (sse.event === 'end') return;
      if (sse.event !== 'line') continue;
      try {
        yield JSON.parse(sse.data) as LogLine;
      } catch {
        throw this.invalidResponse(path, `a line event that is not JSON: ${JSON.stringify(sse.data.slice(0, 80))}`);
      }
    }
    throw new PlanrunApiError({
      status: 0,
      code: ApiErrorCode.unreachable,
      message: `the log stream of ${this.url}${path} ended before its attempt did`,
      url: `${this.url}${path}`,
    });
  }

  private async attemptOf(id: string, options: LogsOptions): Promise<number> {
    if (options.attempt === undefined) return (await this.get(id, { signal: options.signal })).attempt;
    if (!Number.isInteger(options.attempt) || options.attempt < 1) throw new TypeError(`attempt must be a whole number of at least 1, got ${options.attempt}`);
    return options.attempt;
  }

  /** Opens an event stream and yields its raw events until the server ends it. */
  private async *openStream(path: string, lastEventId: string | undefined, signal: AbortSignal | undefined): AsyncGenerator<ServerSentEvent> {
    const connection = new AbortController();
    const cancel = () => connection.abort(signal?.reason);
    signal?.addEventListener('abort', cancel, { once: true });
    let idle: NodeJS.Timeout | undefined;
    const stillAlive = () => {
      clearTimeout(idle);
      idle = setTimeout(() => connection.abort(new Error('event stream idle')), this.reconnect.idleTimeoutMs);
    };
    try {
      const headers: Record<string, string> = { accept: 'text/event-stream' };
      if (lastEventId !== undefined) headers['last-event-id'] = lastEventId;
      const response = await this.send('GET', path, { headers, signal: connection.signal }, async (r) => r);
      if (!response.body) throw this.invalidResponse(path, 'the event stream has no body');
      stillAlive();
      for await (const event of parseEventStream(tapChunks(response.body, stillAlive))) yield event;
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      throw this.networkError(error, path);
    } finally {
      clearTimeout(idle);
      signal?.removeEventListener('abort', cancel);
      connection.abort();
    }
  }

  private async request<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    const text = await this.send(method, path, options, async (response) => response.text());
    if (text === '') return undefined as T;
    try {
      return JSON.parse(text) as T;
    } catch {
      throw this.invalidResponse(path, `expected JSON, got ${JSON.stringify(text.slice(0, 80))}`);
    }
  }

  /**
   * Sends one request and hands a successful response to `read`; any other answer
   * becomes the PlanrunApiError it describes. The timeout covers `read` too, so for a
   * stream `read` should only check the response and return it.
   */
  private async send<R>(method: string, path: string, options: RequestOptions, read: (response: Response) => Promise<R>): Promise<R> {
    const url = `${this.url}${path}`;
    const timer = new AbortController();
    const handle = setTimeout(() => timer.abort(timeoutError(url, this.timeoutMs)), this.timeoutMs);
    const signal = options.signal ? AbortSignal.any([options.signal, timer.signal]) : timer.signal;
    const headers: Record<string, string> = { authorization: `Bearer ${this.key}`, ...options.headers };
    let body: string | undefined;
    if (options.body !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(options.body);
    }
    try {
      const response = await this.fetch(url, { method, headers, body, signal, ...(options.redirect ? { redirect: options.redirect } : {}) });
      if (!response.ok && !(options.redirect === 'manual' && response.status >= 300 && response.status < 400)) {
        const text = await response.text().catch(() => '');
        throw PlanrunApiError.fromResponse(response.status, parseJson(text), url);
      }
      return await read(response);
    } catch (error) {
      if (options.signal?.aborted) throw options.signal.reason;
      if (timer.signal.aborted) throw timer.signal.reason;
      throw this.networkError(error, path);
    } finally {
      clearTimeout(handle);
    }
  }

  /** A failure with no HTTP answer behind it, as a PlanrunApiError naming the URL. */
  private networkError(error: unknown, path: string): unknown {
    if (isPlanrunApiError(error)) return error;
    const url = `${this.url}${path}`;
    const cause = (error as { cause?: { code?: string; message?: string } })?.cause;
    const detail = cause?.code ?? cause?.message ?? (error instanceof Error ? error.message : String(error));
    return new PlanrunApiError({
      status: 0,
      code: ApiErrorCode.unreachable,
      message: `cannot reach planrun at ${this.url} (${detail})`,
      url,
      cause: error,
    });
  }

  private invalidResponse(path: string, message: string): PlanrunApiError {
    return new PlanrunApiError({ status: 0, code: ApiErrorCode.invalidResponse, message: `${this.url}${path}: ${message}`, url: `${this.url}${path}` });
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** Sleeps, or fails with the signal's own reason once it is aborted. */
/** A filter's time range as the API takes it: ISO 8601 strings. */
function timeRange(filter: Pick<FailedJobsFilter, 'endedAfter' | 'endedBefore'>): { endedAfter?: string; endedBefore?: string } {
  const iso = (time: Date | string) => (typeof time === 'string' ? time : time.toISOString());
  return {
    ...(filter.endedAfter === undefined ? {} : { endedAfter: iso(filter.endedAfter) }),
    ...(filter.endedBefore === undefined ? {} : { endedBefore: iso(filter.endedBefore) }),
  };
}

async function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  try {
    await sleep(ms, undefined, signal ? { signal } : undefined);
  } catch (error) {
    if (signal?.aborted) throw signal.reason;
    throw error;
  }
}

function jobPath(id: string): string {
  return `/v1/jobs/${encodeURIComponent(id)}`;
}

function timeoutError(url: string, ms: number): PlanrunApiError {
  return new PlanrunApiError({ status: 0, code: ApiErrorCode.timeout, message: `no answer from ${url} within ${ms} ms`, url });
}

/** Worth trying again later: the server was unreachable, slow, or said it is unavailable. */
function isRetryable(error: unknown): boolean {
  if (!isPlanrunApiError(error)) return true;
  return (
    error.code === ApiErrorCode.unreachable ||
    error.code === ApiErrorCode.timeout ||
    error.code === ApiErrorCode.invalidResponse ||
    error.status === 502 ||
    error.status === 503 ||
    error.status === 504
  );
}

/**
 * Doubling pauses between attempts, and the deadline after which a server that has not
 * answered since `giveUpAfterMs` is given up on.
 */
class Backoff {
  private delay: number;
  private failingSince: number | undefined;

  constructor(private readonly policy: ReconnectOptions) {
    this.delay = policy.initialDelayMs;
  }

  /** The server answered: failures start counting afresh (the pauses keep growing). */
  succeeded(): void {
    this.failingSince = undefined;
  }

  /** The server answered, and all is well again: the next pause is the first one. */
  reset(): void {
    this.succeeded();
    this.delay = this.policy.initialDelayMs;
  }

  /** Records a failure; throws it once failures have gone on for longer than the policy allows. */
  fail(error: unknown): void {
    const now = Date.now();
    this.failingSince ??= now;
    if (now - this.failingSince >= this.policy.giveUpAfterMs) throw error;
  }

  nextDelay(): number {
    const delay = this.delay;
    this.delay = Math.min(this.policy.maxDelayMs, this.delay * 2);
    return delay;
  }
}

async function* tapChunks(body: AsyncIterable<Uint8Array>, onChunk: () => void): AsyncGenerator<Uint8Array> {
  for await (const chunk of body) {
    onChunk();
    yield chunk;
  }
}

/** The event a server-sent event carries, or undefined for one the client does not know. */
export function toJobEvent(sse: ServerSentEvent): JobEvent | undefined {
  if (sse.event !== 'state' && sse.event !== 'progress') return undefined;
  let job: JobSummary;
  try {
    job = JSON.parse(sse.data) as JobSummary;
  } catch {
    return undefined;
  }
  if (typeof job !== 'object' || job === null || typeof job.state !== 'string') return undefined;
  return { type: sse.event, job };
}

/** The event a poll implies: what changed since the job was last seen, as the stream would have said it. */
function change(before: JobSummary | undefined, after: JobSummary): JobEvent | undefined {
  if (!before || after.state !== before.state || after.attempt !== before.attempt || after.cancelRequested !== before.cancelRequested) {
    return { type: 'state', job: after };
  }
  if (after.progress !== before.progress || after.progressMessage !== before.progressMessage) return { type: 'progress', job: after };
  return undefined;
}

/** The body fields of a submission's options (the idempotency key travels apart: a header, or the batch item). */
function submissionOptions(options: SubmitOptions): Omit<SubmitOptions, 'idempotencyKey'> {
  const { requires, maxAttempts, timeoutSeconds, limits, priority, concurrencyKey, concurrencyLimit, runAt, delaySeconds } = options;
  return { requires, maxAttempts, timeoutSeconds, limits, priority, concurrencyKey, concurrencyLimit, runAt, delaySeconds };
}
