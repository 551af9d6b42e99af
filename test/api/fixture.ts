/**
 * For the API tests: a Harness (orchestrator, SQLite ledger, workers on demand) with the
 * HTTP API in front of it, a key store holding one key for each of two tenants and an admin key, and
 * small helpers to call the API and read its event streams.
 */
import type { FastifyInstance, InjectOptions } from 'fastify';
import type { Broker } from '../../src/broker/broker.js';
import { EmbeddedBroker } from '../../src/broker/embedded.js';
import { silentLogger } from '../../src/core/logger.js';
import { KeyStore } from '../../src/keys/key-store.js';
import type { LedgerConfig } from '../../src/ledger/ledger.js';
import type { S3OutputStore } from '../../src/orchestrator/object-store.js';
import { Harness, type HarnessOptions } from '../testing/harness.js';
import { buildApi, type ApiLimits } from '../../src/api/api.js';
import type { RateLimit } from '../../src/api/rate-limit.js';

export interface ApiFixture {
  harness: Harness;
  app: FastifyInstance;
  keys: KeyStore;
  /** Keys of tenant `acme` and tenant `globex`. */
  acmeKey: string;
  globexKey: string;
  /** An admin key: every tenant's jobs. */
  adminKey: string;
  /** Where the API listens on a real socket. */
  url: string;
  close(): Promise<void>;
}

export interface ApiFixtureOptions {
  ledgerConfig?: Partial<LedgerConfig>;
  limits?: Partial<ApiLimits>;
  eventHeartbeatMs?: number;
  /** Serve folder-store outputs from the harness's output folder (`GET /v1/jobs/:id/outputs/*`). */
  serveOutputs?: boolean;
  /** An object store for the orchestrator (uploads, presigned output URLs). */
  objectStore?: S3OutputStore;
  /** The harness's ledger opener and change poll (default: SQLite, the orchestrator's poll). */
  openLedger?: HarnessOptions['openLedger'];
  changePollMs?: number;
  /** Submissions per key (default: the API's default). */
  rateLimit?: RateLimit | 'off';
}

export async function startApi(broker: Broker, options: ApiFixtureOptions = {}): Promise<ApiFixture> {
  const harness = await new Harness({
    broker,
    ledgerConfig: options.ledgerConfig,
    ...(options.objectStore ? { objectStore: options.objectStore } : {}),
    ...(options.openLedger ? { openLedger: options.openLedger } : {}),
    ...(options.changePollMs === undefined ? {} : { changePollMs: options.changePollMs }),
  }).start();
  const keys = new KeyStore(harness.ledger);
  const app = buildApi({
    orchestrator: harness.orchestrator,
    keys,
    broker,
    logger: silentLogger(),
    limits: options.limits,
    eventHeartbeatMs: options.eventHeartbeatMs,
    ...(options.serveOutputs ? { outputDir: harness.outputRoot } : {}),
    ...(options.rateLimit === undefined ? {} : { rateLimit: options.rateLimit }),
  });
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  return {
    harness,
    app,
    keys,
    acmeKey: (await keys.create('acme')).key,
    globexKey: (await keys.create('globex')).key,
    adminKey: (await keys.createAdmin()).key,
    url,
    async close() {
      await app.close();
      await harness.close();
    },
  };
}

/** The API on an embedded broker of its own; `connect` opens more connections to it (for workers). */
export async function startEmbeddedApi(options: ApiFixtureOptions = {}): Promise<ApiFixture & { connect(): Broker }> {
  const broker = new EmbeddedBroker();
  const api = await startApi(broker.connect(), options);
  return {
    ...api,
    connect: () => broker.connect(),
    async close() {
      await api.close();
      await broker.close();
    },
  };
}

/** Runs `body` against a fresh embedded API, closed afterwards whatever happens. */
export async function withEmbeddedApi(body: (api: ApiFixture & { connect(): Broker }) => Promise<void>, options: ApiFixtureOptions = {}): Promise<void> {
  const api = await startEmbeddedApi(options);
  try {
    await body(api);
  } finally {
    await api.close();
  }
}

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  /** Parsed JSON (or the raw text): tests read its fields freely, their assertions check them. */
  body: any;
}

/** One request through fastify's inject, with `key` as the bearer token when given. */
export async function call(
  app: FastifyInstance,
  method: InjectOptions['method'],
  url: string,
  options: { key?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.key !== undefined) headers.authorization = `Bearer ${options.key}`;
  const response = await app.inject({ method, url, headers, ...(options.body === undefined ? {} : { payload: options.body as InjectOptions['payload'] }) });
  const type = String(response.headers['content-type'] ?? '');
  return { status: response.statusCode, headers: response.headers, body: type.includes('json') ? response.json() : response.body };
}

export interface StreamedEvent {
  event: string;
  data: any;
}

/**
 * Reads a job's event stream over a real socket until the server ends it (or `timeoutMs`
 * passes, which fails the read); `onEvent` sees each event as it arrives.
 */
export async function readEventStream(
  fixture: { url: string },
  jobId: string,
  key: string,
  options: { timeoutMs?: number; onEvent?: (event: StreamedEvent) => void; signal?: AbortSignal } = {},
): Promise<{ status: number; events: StreamedEvent[]; comments: number }> {
  const timeout = AbortSignal.timeout(options.timeoutMs ?? 15_000);
  const signal = options.signal ? AbortSignal.any([timeout, options.signal]) : timeout;
  const response = await fetch(`${fixture.url}/v1/jobs/${jobId}/events`, { headers: { authorization: `Bearer ${key}` }, signal });
  const events: StreamedEvent[] = [];
  let comments = 0;
  if (!response.ok || !response.body) return { status: response.status, events, comments };
  const decoder = new TextDecoder();
  let buffered = '';
  try {
    for await (const chunk of response.body) {
      buffered += decoder.decode(chunk, { stream: true });
      let end: number;
      while ((end = buffered.indexOf('\n\n')) >= 0) {
        const block = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        if (block.startsWith(':')) {
          comments++;
          continue;
        }
        const event = /^event: (.*)$/m.exec(block)?.[1] ?? 'message';
        const data = JSON.parse(/^data: (.*)$/m.exec(block)?.[1] ?? 'null') as unknown;
        events.push({ event, data });
        options.onEvent?.({ event, data });
      }
    }
  } catch (error) {
    if (!options.signal?.aborted) throw error;
  }
  return { status: response.status, events, comments };
}
