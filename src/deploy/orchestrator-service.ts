import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { buildApi } from '../api/api.js';
import type { Broker } from '../broker/broker.js';
import { KeyStore } from '../keys/key-store.js';
import type { Ledger, LedgerConfig } from '../ledger/ledger.js';
import { openLedger } from '../ledger/open-ledger.js';
import { Orchestrator } from '../orchestrator/orchestrator.js';
import type { DeclaredFleet } from '../orchestrator/routing.js';
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
  declaredFleet?: DeclaredFleet;
  /** The credential every control message must carry (see Orchestrator's `fleetKey`). */
  fleetKey?: string | undefined;
}

/**
 * Everything the orchestrator process runs, assembled: the ledger (SQLite in the data dir,
 * or PostgreSQL) and the API keys in the data dir, the orchestrator on the given broker, and the HTTP API (with
 * `GET /metrics`). `stop` takes them down in the order that loses nothing: first the
 * API (no new submission), then the orchestrator, then the stores.
 */
export class OrchestratorService {
  private constructor(
    readonly orchestrator: Orchestrator,
    readonly ledger: Ledger,
    readonly keys: KeyStore,
    readonly api: FastifyInstance,
    /** Where the HTTP API listens, e.g. `http://127.0.0.1:7700`. */
    readonly url: string,
  ) {}

  static async start(options: OrchestratorServiceOptions): Promise<OrchestratorService> {
    const ledger = await openLedger(options.ledger, options.dataDir, options.ledgerConfig);
    const keys = KeyStore.open(options.dataDir);
    const orchestrator = new Orchestrator({
      ledger,
      broker: options.broker,
      topology: options.topology,
      logger: options.logger,
      leaseTtlMs: options.ledgerConfig.leaseTtlMs,
      sweepIntervalMs: options.sweepIntervalMs,
      ...(options.declaredFleet ? { declaredFleet: options.declaredFleet } : {}),
      ...(options.fleetKey ? { fleetKey: options.fleetKey } : {}),
    });
    if (!options.fleetKey) {
      options.logger.warn('no fleet key (PLANRUN_FLEET_KEY): anyone who can publish to the broker is taken for a worker of this fleet; see docs/security.md');
    }
    try {
      await orchestrator.start();
      const api = buildApi({ orchestrator, keys, broker: options.broker, logger: options.logger.child({ part: 'api' }) });
      api.get('/metrics', { schema: { hide: true } }, async (_request, reply) => {
        const { contentType, body } = await orchestrator.metrics.render();
        return reply.type(contentType).send(body);
      });
      const url = await api.listen({ host: options.host, port: options.port }).catch((error: unknown) => {
        throw new ListenError(`cannot serve the HTTP API on ${options.host}:${options.port}: ${error instanceof Error ? error.message : String(error)}`);
      });
      return new OrchestratorService(orchestrator, ledger, keys, api, url);
    } catch (error) {
      await orchestrator.stop().catch(() => undefined);
      await ledger.close();
      keys.close();
      throw error;
    }
  }

  async stop(): Promise<void> {
    await this.api.close();
    await this.orchestrator.stop();
    await this.ledger.close();
    this.keys.close();
  }
}
