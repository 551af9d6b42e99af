/**
 * Starts an orchestrator (SQLite ledger in a temp dir, unless given another) and workers for integration
 * tests, on whatever Broker connections the test gives, under a topology prefix of its
 * own so tests never see each other's messages. Everything it starts, `close` stops.
 */
import type { RetentionOptions } from '../../src/orchestrator/retention.js';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Broker, Delivery } from '../../src/broker/broker.js';
import { silentLogger } from '../../src/core/logger.js';
import type { Ledger, LedgerConfig, ResultMessage } from '../../src/ledger/ledger.js';
import { openSqliteLedger } from '../../src/ledger/sqlite/sqlite-ledger.js';
import { Orchestrator } from '../../src/orchestrator/orchestrator.js';
import type { SubmitTenantSource } from '../../src/orchestrator/submit-tenant.js';
import { Topology } from '../../src/topology.js';
import type { S3OutputStore } from '../../src/orchestrator/object-store.js';
import type { StoreCleanupOptions } from '../../src/orchestrator/store-cleaner.js';
import type { OutboxRelayOptions } from '../../src/orchestrator/outbox-relay.js';
import { DirectoryOutputStore } from '../../src/worker/output-store.js';
import { loadJobTypes } from '../../src/worker/runner/job-type.js';
import { ProcessPool } from '../../src/worker/runner/pool.js';
import { Worker, type WorkerOptions, type WorkerTiming } from '../../src/worker/worker.js';
import type { WorkerEvent } from '../../src/worker/worker-events.js';
import { tempDir } from './temp-dir.js';

export const probeJobsModule = fileURLToPath(new URL('../worker/fixtures/probe-jobs.js', import.meta.url));

export interface ReceivedResult {
  messageId: string | undefined;
  routingKey: string;
  body: ResultMessage;
}

export interface HarnessOptions {
  /** The orchestrator's broker connection. */
  broker: Broker;
  ledgerConfig?: Partial<LedgerConfig>;
  sweepIntervalMs?: number;
  /** The fleet key the orchestrator requires of workers (none unless given). */
  fleetKey?: string;
  /** An object store for outputs: live fence answers then carry presigned upload URLs. */
  objectStore?: S3OutputStore;
  /** How long upload URLs outlive their lease (the orchestrator's default unless given). */
  uploadGraceMs?: number;
  /** How the object store's cleaner runs (the orchestrator's default unless given). */
  storeCleanup?: StoreCleanupOptions;
  /** Where queue submissions take their tenant from (default: their body). */
  submitTenant?: SubmitTenantSource;
  /** The topology prefix (default: a random one), for a test that must know it before the harness starts. */
  prefix?: string;
  /** Opens the ledger (default: SQLite in the harness's folder); `startOrchestrator` calls it for each orchestrator. */
  openLedger?: (config: Partial<LedgerConfig>) => Promise<Ledger>;
  /** Relay settings (short intervals unless given). */
  relay?: Partial<OutboxRelayOptions>;
  /** How often watched jobs are looked at while the ledger's change feed is down (the orchestrator's default unless given). */
  changePollMs?: number;
  /** The retention pass (none unless given); it removes pruned jobs' folders from the harness's output folder. */
  retention?: RetentionOptions;
  /** Label the queued and running gauges with `tenant` too. */
  metricsTenantLabel?: boolean;
}

export class Harness {
  readonly topology: Topology;
  readonly dir = tempDir('planrun-harness-');
  readonly outputRoot = join(this.dir.path, 'outputs');
  readonly runLog = join(this.dir.path, 'runs.log');
  readonly results: ReceivedResult[] = [];
  ledger!: Ledger;
  orchestrator!: Orchestrator;
  private readonly closers: Array<() => Promise<void>> = [];
  private readonly queues: string[] = [];

  constructor(private readonly options: HarnessOptions) {
    this.topology = new Topology(options.prefix ?? `t${randomBytes(4).toString('hex')}`);
  }

  async start(): Promise<this> {
    [this.ledger, this.orchestrator] = await this.startOrchestrator(this.options.broker);
    const resultsQueue = `${this.topology.prefix}.test-results`;
    await this.options.broker.declareQueue(resultsQueue);
    await this.options.broker.bindQueue(resultsQueue, this.topology.resultsExchange, '#');
    this.queues.push(resultsQueue, this.topology.controlQueue, this.topology.submitQueue, this.topology.deadQueue);
    const subscription = await this.options.broker.consume(resultsQueue, (d) => this.onResult(d), { prefetch: 100 });
    this.closers.push(() => subscription.cancel());
    return this;
  }

  /**
   * Opens a ledger (`openLedger`, or the harness's SQLite file) and starts an orchestrator
   * on it and `broker`, with the harness's topology and settings; `close` stops both. The
   * first is the harness's own; more share its ledger database (PostgreSQL) as further
   * orchestrators of one service.
   */
  async startOrchestrator(broker: Broker): Promise<[Ledger, Orchestrator]> {
    const ledgerConfig = { leaseTtlMs: 2000, backoffBaseMs: 100, redispatchAfterMs: 5000, ...this.options.ledgerConfig };
    const ledger = this.options.openLedger
      ? await this.options.openLedger(ledgerConfig)
      : await openSqliteLedger({ path: join(this.dir.path, 'ledger.db'), config: ledgerConfig });
    const orchestrator = new Orchestrator({
      ledger,
      broker,
      topology: this.topology,
      logger: silentLogger(),
      leaseTtlMs: ledgerConfig.leaseTtlMs,
      sweepIntervalMs: this.options.sweepIntervalMs ?? 100,
      relay: { idleIntervalMs: 50, retryIntervalMs: 200, ...this.options.relay },
      ...(this.options.changePollMs === undefined ? {} : { changePollMs: this.options.changePollMs }),
      ...(this.options.fleetKey ? { fleetKey: this.options.fleetKey } : {}),
      ...(this.options.objectStore ? { objectStore: this.options.objectStore } : {}),
      ...(this.options.uploadGraceMs === undefined ? {} : { uploadGraceMs: this.options.uploadGraceMs }),
      ...(this.options.storeCleanup ? { storeCleanup: this.options.storeCleanup } : {}),
      ...(this.options.submitTenant ? { submitTenant: this.options.submitTenant } : {}),
      ...(this.options.retention ? { retention: this.options.retention, outputDir: this.outputRoot } : {}),
      ...(this.options.metricsTenantLabel === undefined ? {} : { metricsTenantLabel: this.options.metricsTenantLabel }),
    });
    await orchestrator.start();
    this.closers.push(
      () => orchestrator.stop(),
      () => ledger.close(),
    );
    return [ledger, orchestrator];
  }

  private onResult(delivery: Delivery): void {
    this.results.push({
      messageId: delivery.messageId,
      routingKey: delivery.routingKey,
      body: JSON.parse(delivery.body.toString()) as ResultMessage,
    });
    delivery.ack();
  }

  /** Starts a worker on `broker` with the job types of `jobModules` (default: the probe types). */
  async startWorker(
    broker: Broker,
    options: { slots?: number; timing?: Partial<WorkerTiming>; abortGraceMs?: number; jobModules?: string[] } & Partial<WorkerOptions> = {},
  ): Promise<TestWorker> {
    const jobModules = options.jobModules ?? [probeJobsModule];
    const jobTypes = (await Promise.all(jobModules.map(loadJobTypes))).flat();
    const slots = options.slots ?? 2;
    // What jobs print goes to their logs (and, at debug level, to this silent logger), not into the test's output.
    const runner = new ProcessPool({ jobModules, size: slots, abortGraceMs: options.abortGraceMs ?? 500, progressThrottleMs: 50, logger: silentLogger() });
    await runner.ready();
    const scratchRoot = join(this.dir.path, `scratch-${randomBytes(3).toString('hex')}`);
    mkdirSync(scratchRoot, { recursive: true });
    const worker = new Worker({
      broker,
      topology: this.topology,
      runner,
      jobTypes,
      slots,
      capabilities: [],
      scratchRoot,
      outputStore: new DirectoryOutputStore(this.outputRoot),
      logger: silentLogger(),
      ...options,
      timing: {
        heartbeatIntervalMs: 300,
        controlTimeoutMs: 1000,
        redeliveryDelayMs: 100,
        deadlineCheckIntervalMs: 50,
        progressIntervalMs: 50,
        ...options.timing,
      },
    });
    const events: WorkerEvent[] = [];
    worker.onEvent((event) => events.push(event));
    await worker.start();
    let stopped = false;
    const stop = async () => {
      if (stopped) return;
      stopped = true;
      await worker.stop(0);
    };
    this.closers.push(stop);
    for (const type of jobTypes) this.queues.push(this.topology.workQueue(type.name));
    return { worker, events, stop };
  }

  /** Runs recorded by the probe job type: one line per start, `jobId attempt pid`. */
  runs(jobId?: string): Array<{ jobId: string; attempt: number; pid: number }> {
    if (!existsSync(this.runLog)) return [];
    return readFileSync(this.runLog, 'utf8')
      .trim()
      .split('\n')
      .filter(Boolean)
      .map((line) => {
        const [id, attempt, pid] = line.split(' ');
        return { jobId: id!, attempt: Number(attempt), pid: Number(pid) };
      })
      .filter((run) => jobId === undefined || run.jobId === jobId);
  }

  resultsFor(jobId: string): ReceivedResult[] {
    return this.results.filter((r) => r.body.id === jobId);
  }

  async close(): Promise<void> {
    for (const close of this.closers.reverse()) await close().catch(() => undefined);
    for (const queue of this.queues) await this.options.broker.deleteQueue(queue).catch(() => undefined);
    for (const exchange of this.topology.exchanges) await this.options.broker.deleteExchange(exchange).catch(() => undefined);
    this.dir.remove();
  }
}

export interface TestWorker {
  worker: Worker;
  events: WorkerEvent[];
  stop(): Promise<void>;
}
