import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { buildApi } from '../api/api.js';
import { buildMetricsListener } from '../api/metrics-listener.js';
import type { RateLimit } from '../api/rate-limit.js';
import type { Broker } from '../broker/broker.js';
import { importKeyFile, keyFileName } from '../keys/key-file-import.js';
import { KeyStore } from '../keys/key-store.js';
import type { Ledger, LedgerConfig } from '../ledger/ledger.js';
import { openLedger } from '../ledger/open-ledger.js';
import type { S3OutputStore } from '../orchestrator/object-store.js';
import { Orchestrator } from '../orchestrator/orchestrator.js';
import type { StoreCleanupOptions } from '../orchestrator/store-cleaner.js';
import type { DeclaredFleet } from '../orchestrator/routing.js';
import type { SubmitTenantSource } from '../orchestrator/submit-tenant.js';
import type { Topology } from '../topology.js';

/** The HTTP API could not listen (port taken, bad host): an operator's error, told in one line. */
export class ListenError extends Error {
  override readonly name = 'ListenError';
}

export interface OrchestratorServiceOptions {
  dataDir: string;
  /** `sqlite` (default, in the data dir) or a postgres:// URL. */
  ledger?: string;
  broker: Broker;
  topology: Topology;
  logger: Logger;
  ledgerConfig: LedgerConfig;
  sweepIntervalMs: number;
  host: string;
  port: number;
  /** Serve `GET /metrics` on a listener of its own, without a key, instead of behind a key on the API port. */
  metrics?: { host: string; port: number };
  /** Submissions per API key (`--rate-limit`); `off` for none (default: the API's default). */
  rateLimit?: RateLimit | 'off';
  declaredFleet?: DeclaredFleet;
  /** The credential every control message must carry (see Orchestrator's `fleetKey`). */
  fleetKey?: string | undefined;
  /** Where a queue submission's tenant comes from (default: its body). */
  submitTenant?: SubmitTenantSource | undefined;
  /** An S3-compatible output store (`--store`); without it, workers keep outputs in their own folders. */
  objectStore?: S3OutputStore | undefined;
  /** How long an upload URL outlives its lease's deadline (default 10 s). */
  uploadGraceMs?: number;
  /** How the object store's cleaner runs (default: a grace of one hour). */
  storeCleanup?: StoreCleanupOptions | undefined;
  /** The folder-store outputs `GET /v1/jobs/:id/outputs/:name` may stream from (default `<data-dir>/outputs`). */
  outputDir?: string;
  /** Delete ended jobs (and their outputs there) this long after they ended (`--retain`); absent: keep them. */
  retainMs?: number | undefined;
  /** Label the queued and running gauges with `tenant` too (`--metrics-tenant-label`). */
  metricsTenantLabel?: boolean | undefined;
}

/**
 * Everything the orchestrator process runs, assembled: the ledger (SQLite in the data dir,
 * or PostgreSQL) with the API keys in it, the orchestrator on the given broker, and the HTTP API (with
 * `GET /metrics` behind a key, or on a metrics listener of its own). `stop` takes them
 * down in the order that loses nothing: first the listeners (no new submission), then the
 * orchestrator, then the stores.
 */
export class OrchestratorService {
  private constructor(
    readonly orchestrator: Orchestrator,
    readonly ledger: Ledger,
    readonly keys: KeyStore,
    readonly api: FastifyInstance,
    /** Where the HTTP API listens, e.g. `http://127.0.0.1:7700`. */
    readonly url: string,
    private readonly metricsListener: FastifyInstance | undefined,
    /** Where Prometheus scrapes, e.g. `http://127.0.0.1:9464/metrics` (on the API port, with a key, unless `metrics` was given). */
    readonly metricsUrl: string,
  ) {}

  static async start(options: OrchestratorServiceOptions): Promise<OrchestratorService> {
    const ledger = await openLedger(options.ledger, options.dataDir, options.ledgerConfig);
    let imported: number | undefined;
    try {
      imported = await importKeyFile(ledger, options.dataDir);
    } catch (error) {
      await ledger.close();
      throw error;
    }
    if (imported !== undefined) {
      options.logger.info(
        { imported },
        `imported the API keys of ${keyFileName} in ${options.dataDir} into the ledger (${imported} new); the file is now ${keyFileName}.imported`,
      );
    }
    const keys = new KeyStore(ledger, {
      onUseNotRecorded: (error) => options.logger.warn({ err: error }, "could not record an API key's last use in the ledger; the next request tries again"),
    });
    const outputDir = options.outputDir ?? join(options.dataDir, 'outputs');
    const orchestrator = new Orchestrator({
      ledger,
      broker: options.broker,
      topology: options.topology,
      logger: options.logger,
      leaseTtlMs: options.ledgerConfig.leaseTtlMs,
      sweepIntervalMs: options.sweepIntervalMs,
      ...(options.declaredFleet ? { declaredFleet: options.declaredFleet } : {}),
      ...(options.fleetKey ? { fleetKey: options.fleetKey } : {}),
      ...(options.submitTenant ? { submitTenant: options.submitTenant } : {}),
      ...(options.objectStore ? { objectStore: options.objectStore } : {}),
      ...(options.uploadGraceMs === undefined ? {} : { uploadGraceMs: options.uploadGraceMs }),
      ...(options.storeCleanup ? { storeCleanup: options.storeCleanup } : {}),
      ...(options.retainMs === undefined ? {} : { retention: { retainMs: options.retainMs }, outputDir }),
      ...(options.metricsTenantLabel ? { metricsTenantLabel: true } : {}),
    });
    if (!options.fleetKey) {
      options.logger.warn('no fleet key (PLANRUN_FLEET_KEY): anyone who can publish to the broker is taken for a worker of this fleet; see docs/security.md');
    }
    let metricsListener: FastifyInstance | undefined;
    try {
      await orchestrator.start();
      let metricsAt: string | undefined;
      if (options.metrics) {
        metricsListener = buildMetricsListener(orchestrator.metrics, options.logger.child({ part: 'metrics' }));
        metricsAt = await listen(metricsListener, 'the metrics', options.metrics);
      }
      const api = buildApi({
        orchestrator,
        keys,
        broker: options.broker,
        logger: options.logger.child({ part: 'api' }),
        serveMetrics: metricsListener === undefined,
        outputDir,
        ...(options.rateLimit === undefined ? {} : { rateLimit: options.rateLimit }),
      });
      const url = await listen(api, 'the HTTP API', options);
      const metricsUrl = `${metricsAt ?? url}/metrics`;
      return new OrchestratorService(orchestrator, ledger, keys, api, url, metricsListener, metricsUrl);
    } catch (error) {
      await metricsListener?.close();
      await orchestrator.stop().catch(() => undefined);
      await ledger.close();
      options.objectStore?.close();
      throw error;
    }
  }

  async stop(): Promise<void> {
    await this.api.close();
    await this.metricsListener?.close();
    await this.orchestrator.stop();
    await this.ledger.close();
    this.orchestrator.objectStore?.close();
  }
}

async function listen(app: FastifyInstance, what: string, at: { host: string; port: number }): Promise<string> {
  return app.listen({ host: at.host, port: at.port }).catch((error: unknown) => {
    throw new ListenError(`cannot serve ${what} on ${at.host}:${at.port}: ${error instanceof Error ? error.message : String(error)}`);
  });
}
