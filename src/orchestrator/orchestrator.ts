import type { Logger } from 'pino';
import type { Broker, Subscription } from '../broker/broker.js';
import { type Clock, systemClock } from '../core/clock.js';
import { timingSafeEqual } from 'node:crypto';
import {
  ControlErrorCode,
  controlBatch,
  decode,
  encode,
  fleetKeyHeader,
  isBatchMessage,
  type ControlAnswer,
  type ControlBatchReply,
} from '../control/protocol.js';
import type {
  CancelResult,
  FailedJobFilter,
  Job,
  JobChangeFeed,
  Ledger,
  LedgerConfig,
  RetriedJob,
  RetryResult,
  SubmitParams,
  SubmitResult,
} from '../ledger/ledger.js';
import { defaultTopology, type Topology } from '../topology.js';
import { ControlHandler } from './control-handler.js';
import type { S3OutputStore } from './object-store.js';
import { Fleet, type FleetMember } from './fleet.js';
import { Loop } from './loop.js';
import { JobEvents } from './job-events.js';
import { OrchestratorMetrics } from './metrics.js';
import { missingCapability, offeredJobTypes, type DeclaredFleet } from './routing.js';
import { defaultOutboxRelayOptions, OutboxRelay, type OutboxRelayOptions } from './outbox-relay.js';
import { SubmitConsumer } from './submit-consumer.js';
import { defaultStoreCleanupGraceMs, StoreCleaner, type StoreCleanupOptions } from './store-cleaner.js';
import type { SubmitTenantSource } from './submit-tenant.js';
import { RetentionPass, type RetentionOptions } from './retention.js';
import { Dispatcher } from './dispatcher.js';
import { defaultMaxTypeLabels, TypeLabels } from './type-labels.js';

export interface OrchestratorOptions {
  ledger: Ledger;
  broker: Broker;
  /** Queue and exchange names; `planrun.*` unless given. */
  topology?: Topology;
  logger: Logger;
  /** The ledger's lease TTL, told to workers so they can keep their own deadline. */
  leaseTtlMs: LedgerConfig['leaseTtlMs'];
  sweepIntervalMs?: number;
  /** A worker not heard from for this long leaves the fleet. */
  fleetWindowMs?: number;
  /** How often the fleet the ledger holds (heard by every orchestrator sharing it) is read into this one's (default 1 s). */
  fleetRefreshMs?: number;
  /** After a start on a ledger that holds jobs, how long the fleet refills before it judges routing (default: the lease TTL). */
  fleetRefillMs?: number;
  /** Job types and capabilities counted as present even before any worker is heard from. */
  declaredFleet?: DeclaredFleet;
  /** Control requests handled at once. */
  controlConcurrency?: number;
  /** Job types with a `type` label of their own in the metrics (default 100); the rest count as `_other`. */
  maxTypeLabels?: number;
  /** Label the queued and running gauges with `tenant` too (`--metrics-tenant-label`; default off). */
  metricsTenantLabel?: boolean;
  relay?: Partial<OutboxRelayOptions>;
  /**
   * While the ledger's change feed is down (several orchestrators on PostgreSQL), how
   * often every watched job is looked at again instead (default 1 s).
   */
  changePollMs?: number;
  clock?: Clock;
  /**
   * The credential its workers must show (`PLANRUN_FLEET_KEY`): a control message without
   * it is answered `unauthorized` and changes nothing. Without one, anyone who can publish
   * to the broker is taken for a new worker (docs/security.md).
   */
  fleetKey?: string;
  /** Where a queue submission's tenant comes from (default: its body; see SubmitTenantSource). */
  submitTenant?: SubmitTenantSource;
  /**
   * An S3-compatible store for outputs (`--store`): a live fence answer then carries a
   * presigned PUT URL per output, valid until `uploadGraceMs` (default 10 s) after the
   * lease's deadline. Without one, workers keep outputs in their own folder store.
   */
  objectStore?: S3OutputStore;
  uploadGraceMs?: number;
  /**
   * How the object store's cleaner removes what losing attempts uploaded (default: after
   * a grace of one hour, `--store-cleanup-grace`). Only with `objectStore`.
   */
  storeCleanup?: StoreCleanupOptions;
  /** The retention pass (`--retain`): ended jobs older than `retainMs` are deleted with their outputs. Absent: never. */
  retention?: RetentionOptions;
  /** The folder store whose `<tenant>/<job>/` folders the retention pass removes with their jobs (the API's output folder). */
  outputDir?: string;
}

/**
 * The process that owns the ledger: answers the control plane, relays the outbox,
 * sweeps expired leases. Every effect it has goes through the ledger first, so killing
 * it at any moment loses nothing: restarted, it relays what was not confirmed and
 * sweeps what expired meanwhile.
 */
export class Orchestrator {
  readonly fleet: Fleet;
  readonly relay: OutboxRelay;
  /** Sweeps expired leases, then releases the work of waiting jobs the free slots and limits allow. */
  readonly dispatcher: Dispatcher;
  /** Tells listeners (the event stream, metrics) that a job changed. */
  readonly events = new JobEvents();
  readonly ledger: Ledger;
  /** The orchestrator's clock (the ledger's, in tests that inject one). */
  readonly clock: Clock;
  readonly metrics: OrchestratorMetrics;
  /** The S3-compatible output store, when the orchestrator has one (`--store`). */
  readonly objectStore: S3OutputStore | undefined;
  /** Removes what losing attempts left in the object store, when there is one. */
  readonly storeCleaner: StoreCleaner | undefined;
  /** Deletes ended jobs past the retention period, when there is one. */
  readonly retention: RetentionPass | undefined;
  private readonly control: ControlHandler;
  private readonly submitConsumer: SubmitConsumer;
  private controlSubscription: Subscription | undefined;
  private changeFeed: JobChangeFeed | undefined;
  private readonly fleetRefresh: Loop;
  private changePoll: NodeJS.Timeout | undefined;
  private readonly topology: Topology;

  constructor(private readonly options: OrchestratorOptions) {
    const clock = options.clock ?? systemClock;
    this.clock = clock;
    this.ledger = options.ledger;
    this.objectStore = options.objectStore;
    this.topology = options.topology ?? defaultTopology;
    this.fleet = new Fleet(clock, options.fleetWindowMs ?? Math.max(3 * options.leaseTtlMs, 60_000));
    const offered = (type: string) =>
      (options.declaredFleet?.jobTypes.includes(type) ?? false) || this.fleet.list().some((member) => member.jobTypes.includes(type));
    this.metrics = new OrchestratorMetrics(options.ledger, clock, new TypeLabels(offered, options.maxTypeLabels ?? defaultMaxTypeLabels), {
      tenantLabel: options.metricsTenantLabel ?? false,
    });
    this.control = new ControlHandler(
      options.ledger,
      this.fleet,
      { leaseTtlMs: options.leaseTtlMs },
      {
        granted: (job) => this.metrics.leaseGranted(job),
        settled: (job, attempt, transition) => this.metrics.settled(job, attempt, transition),
        // A worker whose broker user may not declare queues consumes the ones the orchestrator declares.
        heard: (report, offerChanged) => {
          this.relay.declareWorkQueues(report.jobTypes);
          // New slots to fill. (A worker's own slots freed by jobs it ended were announced by their settles.)
          if (offerChanged) this.dispatcher.wake();
        },
      },
      options.objectStore
        ? { store: options.objectStore, now: () => clock.now(), ...(options.uploadGraceMs === undefined ? {} : { graceMs: options.uploadGraceMs }) }
        : undefined,
    );
    const declared = options.declaredFleet ?? { jobTypes: [], capabilities: [] };
    this.relay = new OutboxRelay(
      options.ledger,
      options.broker,
      this.topology,
      options.logger.child({ part: 'relay' }),
      { ...defaultOutboxRelayOptions, ...options.relay },
      {
        offeredTypes: () => {
          const fleet = this.fleet.known();
          return fleet ? offeredJobTypes(fleet, declared) : undefined;
        },
        setAside: (rows, failedJobs) => {
          for (const row of rows) this.metrics.outboxSetAside(row.kind);
          for (const job of failedJobs) this.events.emit({ jobId: job.id, kind: 'state' });
        },
      },
    );
    this.submitConsumer = new SubmitConsumer(
      options.broker,
      this.topology,
      (params) => this.submit(params),
      options.logger.child({ part: 'submit-queue' }),
      options.submitTenant,
    );
    this.dispatcher = new Dispatcher(
      options.ledger,
      options.logger.child({ part: 'dispatcher' }),
      options.sweepIntervalMs ?? 1000,
      this.fleet.windowMs,
      (report) => {
        this.relay.notify();
        // The bulk of a big sweep, the requeued leases, come with their type: no read per job
        // (on PostgreSQL, a round trip each, a pass's worth at once on the pool).
        for (const { jobId, type } of report.requeued) {
          this.events.emit({ jobId, kind: 'state' });
          this.metrics.leaseExpired({ type }, 'requeued');
        }
        const ended = [
          ...report.exhausted.map((jobId) => ({ jobId, outcome: 'exhausted' as const })),
          ...report.cancelled.map((jobId) => ({ jobId, outcome: 'cancelled' as const })),
        ];
        for (const { jobId, outcome } of ended) {
          this.events.emit({ jobId, kind: 'state' });
          void this.ledger.getJob(jobId).then((job) => job && this.metrics.leaseExpired(job, outcome));
        }
        for (const { jobId } of report.abandoned) {
          this.events.emit({ jobId, kind: 'state' });
          void this.ledger.getJob(jobId).then((job) => job && this.metrics.grantAbandoned(job));
        }
        // A released job's waitingFor changed.
        for (const { jobId } of report.released) this.events.emit({ jobId, kind: 'state' });
      },
      () => this.fleet.typesWithFreeSlots(),
      // SQLite: the relay's claim joins the pass's transaction, so what it releases is claimed in the same commit.
      () => {
        if (options.ledger.writesOfATurnCommitTogether) this.relay.notify();
      },
    );
    this.fleetRefresh = new Loop('fleet refresh', options.logger.child({ part: 'fleet' }), async () => {
      this.fleet.merge(await this.ledger.listFleet({ windowMs: this.fleet.windowMs }));
      return options.fleetRefreshMs ?? 1000;
    });
    this.storeCleaner = options.objectStore
      ? new StoreCleaner(
          options.ledger,
          options.objectStore,
          options.logger.child({ part: 'store-cleaner' }),
          clock,
          options.storeCleanup ?? { graceMs: defaultStoreCleanupGraceMs },
          { objectsRemoved: (n) => this.metrics.storeObjectsRemovedBy(n), uploadsAborted: (n) => this.metrics.storeUploadsAbortedBy(n) },
        )
      : undefined;
    this.retention = options.retention
      ? new RetentionPass(
          options.ledger,
          {
            ...(options.outputDir === undefined ? {} : { outputDir: options.outputDir }),
            ...(options.objectStore ? { objectStore: options.objectStore } : {}),
          },
          options.logger.child({ part: 'retention' }),
          clock,
          options.retention,
          (n) => this.metrics.jobsPruned(n),
        )
      : undefined;
  }

  async start(): Promise<void> {
    // A ledger with jobs in it had workers before this start: give them time to be heard from.
    const restarted = (await this.ledger.listJobs({ limit: 1 })).jobs.length > 0;
    if (restarted) this.fleet.refillFor(this.options.fleetRefillMs ?? this.options.leaseTtlMs);
    await this.topology.declareCore(this.options.broker);
    this.controlSubscription = await this.options.broker.serve(
      this.topology.controlQueue,
      async (request) => encode(this.fromFleet(request.headers[fleetKeyHeader]) ? await this.answer(request.body) : unauthorized),
      { prefetch: this.options.controlConcurrency ?? 64 },
    );
    this.changeFeed = await this.ledger.watchJobChanges({
      changed: (jobId) => this.events.emit({ jobId, kind: 'state' }),
      interrupted: (reason) => {
        this.options.logger.warn({ reason }, 'job changes made through other orchestrators are polled for until the feed is back');
        clearInterval(this.changePoll);
        this.changePoll = setInterval(() => this.events.touchAll(), this.options.changePollMs ?? 1000);
      },
      resumed: () => {
        this.options.logger.info('the ledger change feed is back');
        this.stopChangePoll();
        this.events.touchAll();
      },
    });
    this.relay.start();
    this.fleetRefresh.start();
    this.dispatcher.start();
    this.storeCleaner?.start();
    this.retention?.start();
    await this.submitConsumer.start();
  }

  /**
   * Records a job (or finds the one its idempotency key names) and routes it: a job no
   * worker of the fleet can run fails at once as unroutable, naming what is missing.
   */
  async submit(params: SubmitParams): Promise<SubmitResult> {
    const [result] = await this.submitMany([params]);
    return result!;
  }

  async submitMany(params: SubmitParams[]): Promise<SubmitResult[]> {
    // One look at the fleet serves the whole batch.
    const fleet = this.fleet.known();
    const declared = this.options.declaredFleet ?? { jobTypes: [], capabilities: [] };
    const submitted = this.options.ledger.submitMany(params);
    // SQLite: a pass asked for now shares the submit's transaction (and its fsync), and releases the new jobs in it;
    // unless one of them is to fail as unroutable, whose work must not be released before it fails.
    const passJoins =
      this.options.ledger.writesOfATurnCommitTogether === true &&
      (fleet === undefined || params.every((p) => missingCapability({ type: p.type, requires: p.requires ?? [] }, fleet, declared) === undefined));
    if (passJoins) this.dispatcher.wakeInThisTurn();
    const results = await submitted;
    const routed: SubmitResult[] = [];
    for (const result of results) routed.push(result.created ? { created: true, job: await this.admit(result.job, fleet, declared) } : result);
    this.relay.notify();
    if (!passJoins) this.dispatcher.wake();
    return routed;
  }

  /**
   * Redrive: a new job made from a failed one of `tenant` (undefined: any tenant's, an
   * admin), routed like a submission; a job retried before answers the job made from it.
   */
  async retry(jobId: string, tenant: string | undefined): Promise<RetryResult> {
    const result = await this.options.ledger.retry({ jobId, ...(tenant === undefined ? {} : { tenant }) });
    if (result.outcome !== 'retried' || !result.created) return result;
    const job = await this.admit(result.job, this.fleet.known(), this.options.declaredFleet ?? { jobTypes: [], capabilities: [] });
    this.relay.notify();
    this.dispatcher.wake();
    return { ...result, job };
  }

  /**
   * Bulk redrive: retries every unretried failed job matching `filter` (cancelled ones left
   * out) that ended before the call (unless `filter.endedBefore` says), `batch` jobs per
   * ledger transaction, until none is left; answers the jobs made.
   */
  async retryFailed(filter: FailedJobFilter, batch = defaultRetryBatch): Promise<RetriedJob[]> {
    // Jobs that fail while the redrive runs (its own new ones among them) wait for the next one.
    const range = { endedBefore: filter.endedBefore ?? this.clock.now() };
    const declared = this.options.declaredFleet ?? { jobTypes: [], capabilities: [] };
    const all: RetriedJob[] = [];
    for (;;) {
      const retried = await this.options.ledger.retryMany({ ...filter, ...range, limit: batch });
      const fleet = this.fleet.known();
      for (const { retryOf, job } of retried) all.push({ retryOf, job: await this.admit(job, fleet, declared) });
      this.relay.notify();
      this.dispatcher.wake();
      if (retried.length < batch) return all;
    }
  }

  /** A job just made (submitted or retried): routed, counted and announced. */
  private async admit(created: Job, fleet: readonly FleetMember[] | undefined, declared: DeclaredFleet): Promise<Job> {
    const job = await this.route(created, fleet, declared);
    this.metrics.jobSubmitted(created);
    this.events.emit({ jobId: created.id, kind: 'state' });
    return job;
  }

  private async route(job: Job, fleet: readonly FleetMember[] | undefined, declared: DeclaredFleet): Promise<Job> {
    if (!fleet) return job;
    const missing = missingCapability(job, fleet, declared);
    if (!missing) return job;
    const rejected = await this.options.ledger.reject({ jobId: job.id, error: { class: 'permanent', code: 'unroutable', message: missing } });
    return rejected.rejected ? rejected.job : job;
  }

  /** Cancels a job of `tenant`: at once when queued, at the worker's next heartbeat when running. */
  async cancel(jobId: string, tenant: string): Promise<CancelResult> {
    const result = await this.options.ledger.cancel({ jobId, tenant });
    if (result.outcome !== 'refused') {
      this.events.emit({ jobId, kind: 'state' });
      this.relay.notify();
    }
    return result;
  }

  async stop(): Promise<void> {
    await this.submitConsumer.stop();
    await this.controlSubscription?.cancel();
    await this.dispatcher.stop();
    await this.storeCleaner?.stop();
    await this.retention?.stop();
    await this.relay.stop();
    await this.fleetRefresh.stop();
    await this.changeFeed?.close();
    this.stopChangePoll();
  }

  /** Whether changes made through other orchestrators are heard as they commit (false: polled for, the feed is down). */
  get changeFeedLive(): boolean {
    return this.changeFeed !== undefined && this.changePoll === undefined;
  }

  private stopChangePoll(): void {
    clearInterval(this.changePoll);
    this.changePoll = undefined;
  }

  /** Whether a control message carries the fleet key, when the orchestrator has one. */
  private fromFleet(presented: unknown): boolean {
    const expected = this.options.fleetKey;
    if (expected === undefined) return true;
    if (typeof presented !== 'string') return false;
    const [a, b] = [Buffer.from(presented), Buffer.from(expected)];
    return a.length === b.length && timingSafeEqual(a, b);
  }

  private async answer(body: Buffer): Promise<ControlAnswer | ControlBatchReply> {
    let message: unknown;
    try {
      message = decode(body);
    } catch {
      return { op: 'error', code: 'invalid_request', message: 'control request is not JSON' };
    }
    if (!isBatchMessage(message)) return this.answerOne(message);
    const batch = controlBatch.safeParse(message);
    if (!batch.success) {
      return { op: 'error', code: 'invalid_request', message: batch.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ') };
    }
    // Answered concurrently, so the batch's ledger writes share a group commit.
    return { op: 'batch', answers: await Promise.all(batch.data.requests.map((request) => this.answerOne(request))) };
  }

  private async answerOne(request: unknown): Promise<ControlAnswer> {
    const answer = await this.control.handle(request);
    this.announce(answer);
    return answer;
  }

  /** Wakes the relay and the event listeners for what a control request changed. */
  private announce(answer: ControlAnswer): void {
    if (answer.op === 'lease' && answer.granted) this.events.emit({ jobId: answer.jobId, kind: 'state' });
    if (answer.op === 'progress' && answer.accepted) this.events.emit({ jobId: answer.jobId, kind: 'progress' });
    if (answer.op === 'release' && answer.accepted) this.dispatcher.wake();
    if (answer.op === 'settle' && answer.accepted) {
      this.relay.notify();
      this.dispatcher.wake();
      this.events.emit({ jobId: answer.jobId, kind: 'state' });
    }
  }
}

/** Failed jobs retried per ledger transaction by a bulk redrive. */
export const defaultRetryBatch = 100;

const unauthorized: ControlAnswer = {
  op: 'error',
  code: ControlErrorCode.unauthorized,
  message: 'this control message does not carry the fleet key the orchestrator was given (PLANRUN_FLEET_KEY)',
};
