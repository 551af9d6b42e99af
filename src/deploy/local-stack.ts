import type { RateLimit } from '../api/rate-limit.js';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import type { Broker } from '../broker/broker.js';
import { RabbitMqBroker } from '../broker/rabbitmq.js';
import type { QueueType } from '../broker/rabbitmq-topology.js';
import type { LogFormat } from '../core/logger.js';
import type { LedgerConfig } from '../ledger/ledger.js';
import type { S3OutputStore } from '../orchestrator/object-store.js';
import type { StoreCleanupOptions } from '../orchestrator/store-cleaner.js';
import type { SubmitTenantSource } from '../orchestrator/submit-tenant.js';
import { Topology } from '../topology.js';
import { EmbeddedBrokerService } from './embedded-broker-service.js';
import { ensureLocalKey, saveLocalUrl } from './local-key.js';
import { OrchestratorService } from './orchestrator-service.js';
import { Supervisor } from './supervisor.js';

const cliPath = fileURLToPath(new URL('../cli/main.js', import.meta.url));

/** How long a local worker's aborted job process may take to stop. */
const workerAbortGraceMs = 10_000;

export interface LocalStackOptions {
  dataDir: string;
  /** `sqlite` (default) or a postgres:// URL. */
  ledger?: string;
  host: string;
  port: number;
  /** A metrics listener of its own (see OrchestratorServiceOptions). */
  metrics?: { host: string; port: number };
  /** Submissions per API key (see OrchestratorServiceOptions). */
  rateLimit?: RateLimit | 'off';
  /** RabbitMQ; without it, an embedded broker stored in `<data-dir>/broker.db` that workers reach through `<data-dir>/broker.sock`. */
  amqp?: string;
  /** How planrun's queues are declared on RabbitMQ (default classic), by the orchestrator and the workers. */
  queueType?: QueueType;
  /** Where a queue submission's tenant comes from (default: its body). */
  submitTenant?: SubmitTenantSource;
  /** An S3-compatible output store (`--store`); the workers then upload with the URLs the fence hands out. */
  objectStore?: S3OutputStore;
  /** How the object store's cleaner runs (default: a grace of one hour). */
  storeCleanup?: StoreCleanupOptions;
  /** Delete ended jobs this long after they ended (`--retain`); absent: keep them. */
  retainMs?: number;
  /** Label the queued and running gauges with `tenant` too. */
  metricsTenantLabel?: boolean;
  workers: number;
  slots: number;
  /** Extra job-types modules for the workers. */
  jobs: string[];
  capabilities: string[];
  /** `--sandbox`, `--job-user`, `--job-env`, `--job-timeout` for the workers (see sandbox-options.ts). */
  workerSandboxArgs?: string[];
  /**
   * Job processes run as another user: their scratch folders then live outside the data
   * dir (which that user cannot enter), in a folder of their own under the system's temp.
   */
  jobUser?: boolean;
  ledgerConfig: LedgerConfig;
  sweepIntervalMs: number;
  heartbeatIntervalMs: number;
  /** How long a stopping worker lets its jobs run before it hands them back. */
  stopGraceMs: number;
  prefix: string;
  logger: Logger;
  /** Log level of the worker processes (their logs go to this process's stderr). */
  workerLogLevel: string;
  /** How the worker processes write their logs (default: JSON). */
  workerLogFormat?: LogFormat;
}

/**
 * planrun on one machine: the orchestrator (ledger, HTTP API, broker or embedded broker)
 * in this process, and N worker processes, supervised: one that exits for any reason is
 * started again. What `planrun up` and `planrun demo` run.
 */
export class LocalStack {
  private constructor(
    readonly service: OrchestratorService,
    readonly supervisor: Supervisor,
    /** The API key of the `local` tenant, saved in the data dir for the client commands. */
    readonly key: string,
    readonly brokerDescription: string,
    /** The orchestrator's broker connection (an observer may declare and consume on it too). */
    readonly broker: Broker,
    readonly topology: Topology,
    private readonly embedded: EmbeddedBrokerService | undefined,
  ) {}

  get url(): string {
    return this.service.url;
  }

  static async start(options: LocalStackOptions): Promise<LocalStack> {
    const dataDir = resolve(options.dataDir);
    // The ledger, the keys and the broker's socket: no one else's to read (a folder that exists keeps its mode).
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    const scratchRoot = options.jobUser ? privateScratchRoot() : join(dataDir, 'scratch');
    let embedded: EmbeddedBrokerService | undefined;
    let broker: Broker;
    let workerBrokerArgs: string[];
    // The URL (its password) reaches the workers in their environment, never on a command line anyone can read.
    let workerBrokerEnv: NodeJS.ProcessEnv;
    if (options.amqp) {
      const queueType = options.queueType ?? 'classic';
      broker = await RabbitMqBroker.connect({ url: options.amqp, queueType });
      workerBrokerArgs = ['--queue-type', queueType];
      workerBrokerEnv = { PLANRUN_AMQP_URL: options.amqp };
    } else {
      embedded = await EmbeddedBrokerService.start(dataDir);
      broker = embedded.broker.connect();
      workerBrokerArgs = ['--broker-socket', embedded.socketPath];
      workerBrokerEnv = {};
    }
    const topology = new Topology(options.prefix);
    // Only the workers this process starts get it: nothing else on the broker is taken for one of them.
    const fleetKey = randomBytes(32).toString('base64url');
    const service = await OrchestratorService.start({
      fleetKey,
      dataDir,
      ...(options.ledger ? { ledger: options.ledger } : {}),
      broker,
      topology,
      logger: options.logger,
      ledgerConfig: options.ledgerConfig,
      sweepIntervalMs: options.sweepIntervalMs,
      host: options.host,
      port: options.port,
      ...(options.metrics ? { metrics: options.metrics } : {}),
      ...(options.rateLimit === undefined ? {} : { rateLimit: options.rateLimit }),
      ...(options.objectStore ? { objectStore: options.objectStore } : {}),
      ...(options.storeCleanup ? { storeCleanup: options.storeCleanup } : {}),
      ...(options.submitTenant ? { submitTenant: options.submitTenant } : {}),
      ...(options.retainMs === undefined ? {} : { retainMs: options.retainMs }),
      ...(options.metricsTenantLabel ? { metricsTenantLabel: true } : {}),
    });
    const key = await ensureLocalKey(service.keys, dataDir);
    saveLocalUrl(dataDir, service.url);
    // A worker's stop takes its grace, then a control round trip to hand back, then the abort grace of its job processes.
    const supervisor = new Supervisor({ logger: options.logger.child({ part: 'supervisor' }), stopGraceMs: options.stopGraceMs + workerAbortGraceMs + 5_000 });
    for (let n = 1; n <= options.workers; n++) {
      supervisor.start({
        name: `worker-${n}`,
        args: [
          cliPath,
          'worker',
          ...workerBrokerArgs,
          '--prefix',
          options.prefix,
          '--slots',
          String(options.slots),
          '--heartbeat-interval',
          `${options.heartbeatIntervalMs}ms`,
          '--stop-grace',
          `${options.stopGraceMs}ms`,
          '--abort-grace',
          `${workerAbortGraceMs}ms`,
          '--output-dir',
          join(dataDir, 'outputs'),
          '--scratch-dir',
          join(scratchRoot, `worker-${n}`),
          ...options.jobs.flatMap((module) => ['--jobs', resolve(module)]),
          ...(options.workerSandboxArgs ?? []),
          ...(options.capabilities.length > 0 ? ['--capabilities', options.capabilities.join(',')] : []),
        ],
        env: {
          ...process.env,
          ...workerBrokerEnv,
          PLANRUN_LOG_LEVEL: options.workerLogLevel,
          PLANRUN_LOG_FORMAT: options.workerLogFormat ?? 'json',
          PLANRUN_FLEET_KEY: fleetKey,
        },
      });
    }
    const description = options.amqp ? `RabbitMQ ${redact(options.amqp)}` : `embedded (${embedded!.socketPath})`;
    return new LocalStack(service, supervisor, key, description, broker, topology, embedded);
  }

  /** During `stop`: workers stop at once, handing back their running jobs. */
  hurry(): void {
    this.supervisor.hurry();
  }

  /** Workers drain and exit first; then the orchestrator stops taking anything and closes. */
  async stop(): Promise<void> {
    await this.supervisor.stop();
    await this.service.stop();
    await this.broker.close();
    await this.embedded?.stop();
  }
}

/** A URL fit for a log line: the password hidden. */
function redact(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(an invalid URL)';
  }
}

/** Where another user's jobs can reach their scratch folders (0711: enter, not list). */
function privateScratchRoot(): string {
  const root = mkdtempSync(join(tmpdir(), 'planrun-scratch-'));
  chmodSync(root, 0o711);
  return root;
}
