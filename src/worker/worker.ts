import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { isBrokerError, type Broker, type Delivery, type Subscription } from '../broker/broker.js';
import { type Clock, systemClock } from '../core/clock.js';
import { type SerializedError } from '../core/errors.js';
import type { JobResult, WorkMessage } from '../ledger/ledger.js';
import { defaultTopology, tenantHeader, type Topology } from '../topology.js';
import { Admission } from './admission.js';
import { ControlErrorCode, type HeldBackType, type LeaseReply } from '../control/protocol.js';
import { ControlClient, ControlError, newWorkerSecret } from './control-client.js';
import { DedupMemory } from './dedup.js';
import { LeaseBook, type HeldLease } from './lease-book.js';
import { offeredTypes } from './offered-types.js';
import type { OutputStore } from './output-store.js';
import type { JobType } from './runner/job-type.js';
import type { RunTask } from './runner/protocol.js';
import type { RunOutcome } from './runner/run-outcome.js';
import { createScratch, removeScratch } from './runner/scratch.js';
import { WorkerEvents, type WorkerEvent } from './worker-events.js';

/** Runs job code; the process pool in production, anything with the same contract in tests. */
export interface JobRunner {
  run(task: RunTask, hooks: { onProgress(fraction: number, message?: string): void; signal?: AbortSignal }): Promise<RunOutcome>;
  close(): Promise<void>;
}

export interface WorkerOptions {
  broker: Broker;
  /** Queue and exchange names; `planrun.*` unless given. */
  topology?: Topology;
  runner: JobRunner;
  /** The job types this worker offers (their names, requirements and output reserves). */
  jobTypes: readonly JobType[];
  slots: number;
  capabilities: readonly string[];
  scratchRoot: string;
  outputStore: OutputStore;
  logger: Logger;
  workerId?: string;
  /** The fleet key the orchestrator requires of its workers, if it has one (`PLANRUN_FLEET_KEY`). */
  fleetKey?: string | undefined;
  clock?: Clock;
  timing?: Partial<WorkerTiming>;
  /** Disk reserved for a job type that declares none. */
  defaultOutputReserveBytes?: number;
  /** Called once when a Fatal error stops the worker; the process should exit non-zero. */
  onFatal?: (error: SerializedError) => void;
  /** Measures free disk; injectable for tests. */
  freeBytes?: (path: string) => Promise<number>;
}

export interface WorkerTiming {
  heartbeatIntervalMs: number;
  /** How long a control request waits for the orchestrator. */
  controlTimeoutMs: number;
  /** After a lease request timed out, how much longer a late grant is still listened for (and used if it can be). */
  lateGrantWindowMs: number;
  /** How long a message this worker cannot take now is held before it goes back. */
  redeliveryDelayMs: number;
  /** Fraction of the lease TTL kept as a margin for clock-rate drift. */
  leaseSafetyFraction: number;
  /** How often the local lease deadlines are checked. */
  deadlineCheckIntervalMs: number;
  /** Progress sent to the orchestrator at most this often per job. */
  progressIntervalMs: number;
}

export const defaultWorkerTiming: WorkerTiming = {
  heartbeatIntervalMs: 30_000,
  controlTimeoutMs: 5_000,
  lateGrantWindowMs: 60_000,
  redeliveryDelayMs: 1_000,
  leaseSafetyFraction: 0.1,
  deadlineCheckIntervalMs: 250,
  progressIntervalMs: 1_000,
};

export const defaultOutputReserveBytes = 64 * 1024 * 1024;

type GrantedLease = Extract<LeaseReply, { granted: true }>;
type LateGrantUnused = Extract<WorkerEvent, { type: 'late_grant_unused' }>['reason'];

interface RunningJob {
  lease: HeldLease;
  type: JobType;
  /** Why the lease was lost, once it was (`handed_back`: this worker released it). */
  lostReason?: string;
  lastProgressSentAt: number;
  /** The job's code returned: its outcome is being fenced, stored or settled, so it is not handed back. */
  returned: boolean;
  /** The release of this lease, once asked for (see handBack). */
  handingBack?: Promise<void>;
}

/** Set as a job's lostReason once this worker handed its lease back: nothing more is said about that attempt. */
const handedBack = 'handed_back';

/** What a job handed back for no fault of its own records on its attempt. */
function workerStopped(why: string): SerializedError {
  return { class: 'transient', code: 'worker_stopped', message: `the worker stopped before the job ended (${why}); handed back for its next attempt` };
}

/**
 * A worker: takes work messages, leases each job in the ledger, acks the message at
 * once, runs the job in a child process while its heartbeat keeps the lease, stores the
 * outputs only after the fence says the lease is still its own, then settles.
 */
export class Worker {
  readonly id: string;
  private readonly clock: Clock;
  private readonly timing: WorkerTiming;
  private readonly control: ControlClient;
  private readonly dedup = new DedupMemory(10_000);
  private readonly admission: Admission;
  private readonly leases: LeaseBook;
  private readonly events = new WorkerEvents();
  private readonly running = new Map<string, RunningJob>();
  private readonly typesByName: Map<string, JobType>;
  private readonly heldBack: HeldBackType[];
  private subscriptions: Subscription[] = [];
  private consuming = false;
  private stopping = false;
  private stopped: Promise<void> | undefined;
  private fatalError: SerializedError | undefined;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private deadlineTimer: NodeJS.Timeout | undefined;
  private readonly pendingTimers = new Set<NodeJS.Timeout>();
  /**
   * Deliveries that found every slot taken, oldest first: each takes the next slot that
   * frees, or goes back to the broker after `redeliveryDelayMs` as before (see waitForSlot).
   */
  private readonly slotWaiters: Array<{ delivery: Delivery; timer: NodeJS.Timeout }> = [];
  /** A heartbeat asked for by a grant is in flight / another one is wanted after it (see heartbeatAfterGrant). */
  private grantHeartbeat: 'idle' | 'in_flight' | 'again' = 'idle';
  private idle: (() => void) | undefined;

  constructor(private readonly options: WorkerOptions) {
    this.id = options.workerId ?? `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
    this.clock = options.clock ?? systemClock;
    this.timing = { ...defaultWorkerTiming, ...options.timing };
    this.control = new ControlClient(options.broker, options.topology ?? defaultTopology, this.timing.controlTimeoutMs, this.timing.lateGrantWindowMs, {
      secret: newWorkerSecret(),
      fleetKey: options.fleetKey,
    });
    this.admission = new Admission(options.slots, options.scratchRoot, options.freeBytes);
    this.leases = new LeaseBook(this.clock);
    const { offered, heldBack } = offeredTypes(options.jobTypes, options.capabilities);
    for (const { type, missing } of heldBack) {
      options.logger.warn({ type, missing }, 'job type not offered: this worker lacks a capability it requires');
    }
    this.typesByName = new Map(offered.map((type) => [type.name, type]));
    this.heldBack = heldBack;
  }

  onEvent(listener: (event: WorkerEvent) => void): () => void {
    return this.events.on(listener);
  }

  get runningJobs(): number {
    return this.running.size;
  }

  async start(): Promise<void> {
    for (const type of this.typesByName.values()) {
      const queue = (this.options.topology ?? defaultTopology).workQueue(type.name);
      await this.options.broker.declareQueue(queue);
      this.subscriptions.push(
        await this.options.broker.consume(queue, (delivery) => this.onDelivery(delivery), { prefetch: this.options.slots }),
      );
    }
    this.consuming = true;
    this.heartbeatTimer = setInterval(() => void this.heartbeat(), this.timing.heartbeatIntervalMs);
    this.deadlineTimer = setInterval(() => this.checkLocalDeadlines(), this.timing.deadlineCheckIntervalMs);
    void this.heartbeat();
    this.options.logger.info({ worker: this.id, types: [...this.typesByName.keys()], slots: this.options.slots }, 'worker started');
  }

  /**
   * Graceful stop: take no more work, let running jobs finish until `deadlineMs`, then
   * hand back the leases of those still running (see handBack) and abort them, so the
   * next worker starts them at once instead of a lease TTL later.
   */
  stop(deadlineMs = 30_000): Promise<void> {
    this.stopped ??= this.drainAndClose(deadlineMs);
    return this.stopped;
  }

  /**
   * Stop at once (a second signal): hand back every lease of a job still running without
   * waiting for any job; resolves once the orchestrator answered (or could not be reached,
   * and those leases run out as after a crash). The caller may exit then.
   */
  async stopNow(): Promise<void> {
    void this.stop(0);
    await this.handBackAll('it was stopped at once');
  }

  private async drainAndClose(deadlineMs: number): Promise<void> {
    this.stopping = true;
    await this.cancelSubscriptions();
    if (this.running.size > 0) {
      const drained = new Promise<void>((resolve) => (this.idle = resolve));
      const deadline = setTimeout(() => void this.handBackAll(`its stop grace of ${deadlineMs} ms ran out`), deadlineMs);
      await drained;
      clearTimeout(deadline);
    }
    this.stopTimers();
    await this.options.runner.close();
    this.options.logger.info({ worker: this.id }, 'worker stopped');
  }

  private stopTimers(): void {
    clearInterval(this.heartbeatTimer);
    clearInterval(this.deadlineTimer);
    for (const timer of this.pendingTimers) clearTimeout(timer);
    this.pendingTimers.clear();
    // Their timers are gone; cancelling the subscriptions hands their messages back.
    this.slotWaiters.length = 0;
  }

  private async cancelSubscriptions(): Promise<void> {
    const subscriptions = this.subscriptions;
    this.subscriptions = [];
    this.consuming = false;
    await Promise.allSettled(subscriptions.map((s) => s.cancel()));
  }

  /** Holds the message briefly, then gives it back for this or another worker. */
  private giveBack(delivery: Delivery): void {
    const timer = setTimeout(() => {
      this.pendingTimers.delete(timer);
      delivery.nack({ requeue: true });
    }, this.timing.redeliveryDelayMs);
    this.pendingTimers.add(timer);
  }

  /**
   * Every slot is taken: rather than hold the message for `redeliveryDelayMs` and then
   * give it back (after ack-early the broker keeps sending while slots are busy), let it
   * take the next slot that frees within that time, and give it back only if none does.
   * For long jobs nothing changes (no slot frees in time: the message goes back, for a
   * worker with room); for short ones a slot is never left idle while a message waits.
   * At most `prefetch` (= slots) deliveries can wait here, all unacknowledged, so a crash
   * hands them back to the broker.
   */
  private waitForSlot(delivery: Delivery): void {
    const waiter = {
      delivery,
      timer: setTimeout(() => {
        this.pendingTimers.delete(waiter.timer);
        const index = this.slotWaiters.indexOf(waiter);
        if (index !== -1) this.slotWaiters.splice(index, 1);
        delivery.nack({ requeue: true });
      }, this.timing.redeliveryDelayMs),
    };
    this.pendingTimers.add(waiter.timer);
    this.slotWaiters.push(waiter);
  }

  /** A slot was released: the delivery that waited longest for one goes through admission again now. */
  private slotFreed(): void {
    const waiter = this.slotWaiters.shift();
    if (!waiter) return;
    clearTimeout(waiter.timer);
    this.pendingTimers.delete(waiter.timer);
    void this.onDelivery(waiter.delivery);
  }

  private async onDelivery(delivery: Delivery): Promise<void> {
    const work = parseWorkMessage(delivery);
    if (!work) {
      // Nobody could ever run it; the ledger re-sends any real job whose message is lost.
      this.options.logger.error({ messageId: delivery.messageId }, 'malformed work message dropped');
      delivery.nack({ requeue: false });
      return;
    }
    const type = this.typesByName.get(work.type);
    if (this.stopping || !type) {
      this.giveBack(delivery);
      return;
    }
    const local = this.running.get(work.jobId);
    if (local && local.lease.attempt !== work.attempt) {
      // Another attempt of this job is still winding down here: let another worker (or later) take this one.
      this.giveBack(delivery);
      return;
    }
    if (local || this.dedup.has(work.jobId, work.attempt)) {
      this.events.emit({ type: 'duplicate_dropped', jobId: work.jobId, attempt: work.attempt });
      delivery.ack();
      return;
    }
    const admissionKey = `${work.jobId}@${work.attempt}`;
    const decision = await this.admission.admit(admissionKey, this.reserveOf(type));
    if (!decision.admitted) {
      this.events.emit({ type: 'admission_refused', jobId: work.jobId, attempt: work.attempt, reason: decision.reason! });
      this.options.logger.info({ jobId: work.jobId, reason: decision.reason, detail: decision.detail }, 'not admitted; message goes back');
      if (decision.reason === 'no_free_slot') this.waitForSlot(delivery);
      else this.giveBack(delivery);
      return;
    }
    this.dedup.remember(work.jobId, work.attempt);
    void this.updateFlowControl();
    const release = this.releaser(admissionKey);
    try {
      const sentAt = this.clock.now();
      const reply = await this.control.lease(
        { jobId: work.jobId, attempt: work.attempt, tenant: work.tenant, worker: this.id },
        (late) => void this.useLateGrant(work, type, late, sentAt),
      );
      // Ack-early: granted or refused, the broker is done with this message now.
      delivery.ack();
      if (!reply.granted) {
        this.events.emit({ type: 'lease_refused', jobId: work.jobId, attempt: work.attempt, reason: reply.reason });
        release();
        return;
      }
      if (this.running.get(work.jobId)?.lease.attempt === work.attempt) {
        // A late grant of an earlier request for this very attempt is running it already (the same lease, renewed).
        this.events.emit({ type: 'duplicate_dropped', jobId: work.jobId, attempt: work.attempt });
        release();
        return;
      }
      this.startJob(work, type, reply, sentAt, release);
    } catch (error) {
      // The orchestrator did not answer: keep nothing, ack nothing; the message comes back.
      this.dedup.forget(work.jobId, work.attempt);
      release();
      this.refusedAsWorker(error);
      this.options.logger.warn({ jobId: work.jobId, err: describe(error) }, 'lease request failed; message goes back');
      this.giveBack(delivery);
    }
  }

  private reserveOf(type: JobType): number {
    return type.outputReserveBytes ?? this.options.defaultOutputReserveBytes ?? defaultOutputReserveBytes;
  }

  /** Frees the admission slot of one delivery, once however often it is called. */
  private releaser(admissionKey: string): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.admission.release(admissionKey);
      // Before flow control looks: a waiting delivery takes the slot, and consuming stays paused.
      this.slotFreed();
      void this.updateFlowControl();
    };
  }

  private startJob(work: WorkMessage, type: JobType, reply: GrantedLease, sentAt: number, release: () => void, late = false): void {
    const lease = this.leases.add({ jobId: work.jobId, attempt: work.attempt, token: reply.token, tenant: work.tenant }, sentAt, this.safeTtl(reply.ttlMs));
    const job: RunningJob = { lease, type, lastProgressSentAt: 0, returned: false };
    this.running.set(work.jobId, job);
    this.events.emit({ type: 'lease_granted', jobId: work.jobId, attempt: work.attempt, token: reply.token, ...(late ? { late: true as const } : {}) });
    this.heartbeatAfterGrant();
    void this.runJob(job, reply.input).finally(release);
  }

  /**
   * A lease granted after this worker stopped waiting for it (the orchestrator had taken
   * the request before a cut and answered after it): run the job if it still can: not
   * stopping, not running it already (a redelivery of the same message may have been
   * leased here again), a free slot, and the lease not near its end by the local clock,
   * counted from when the request was sent. Otherwise the lease runs out unused, as before.
   */
  private async useLateGrant(work: WorkMessage, type: JobType, reply: GrantedLease, sentAt: number): Promise<void> {
    const unusable = (): LateGrantUnused | undefined => {
      if (this.stopping) return 'stopping';
      if (this.running.has(work.jobId)) return 'running';
      if (this.clock.now() >= sentAt + this.safeTtl(reply.ttlMs)) return 'lease_near_end';
      return undefined;
    };
    const unused = (reason: LateGrantUnused) => this.events.emit({ type: 'late_grant_unused', jobId: work.jobId, attempt: work.attempt, reason });
    const before = unusable();
    if (before) return unused(before);
    // A key of its own: a redelivery of the same message may hold `<job>@<attempt>` right now.
    const admissionKey = `${work.jobId}@${work.attempt}/late`;
    let decision;
    try {
      decision = await this.admission.admit(admissionKey, this.reserveOf(type));
    } catch (error) {
      this.options.logger.warn({ jobId: work.jobId, err: describe(error) }, 'late lease grant not used: admission failed');
      return unused('not_admitted');
    }
    if (!decision.admitted) return unused('not_admitted');
    const release = this.releaser(admissionKey);
    const after = unusable();
    if (after) {
      release();
      return unused(after);
    }
    this.dedup.remember(work.jobId, work.attempt);
    void this.updateFlowControl();
    this.startJob(work, type, reply, sentAt, release, true);
  }

  private safeTtl(ttlMs: number): number {
    return ttlMs * (1 - this.timing.leaseSafetyFraction);
  }

  private async runJob(job: RunningJob, input: unknown): Promise<void> {
    const { lease } = job;
    const task = { jobId: lease.jobId, attempt: lease.attempt, tenant: lease.tenant, type: job.type.name, input };
    let scratchDir: string | undefined;
    try {
      scratchDir = await createScratch(this.options.scratchRoot, lease.jobId, lease.attempt);
      const outcome = await this.options.runner.run(
        { ...task, scratchDir },
        { onProgress: (fraction, message) => this.onProgress(job, fraction, message), signal: lease.abort.signal },
      );
      job.returned = true;
      await this.finish(job, outcome, scratchDir);
    } catch (error) {
      this.options.logger.error({ jobId: lease.jobId, err: describe(error) }, 'job handling failed');
    } finally {
      this.running.delete(lease.jobId);
      this.leases.remove(lease.jobId);
      if (scratchDir) await removeScratch(scratchDir).catch(() => undefined);
      this.events.emit({ type: 'job_done', jobId: lease.jobId, attempt: lease.attempt });
      if (this.running.size === 0) this.idle?.();
    }
  }

  private async finish(job: RunningJob, outcome: RunOutcome, scratchDir: string): Promise<void> {
    const { lease } = job;
    if (job.lostReason === handedBack) return;
    if (job.lostReason && job.lostReason !== 'cancelled') {
      this.events.emit({ type: 'abandoned', jobId: lease.jobId, attempt: lease.attempt, reason: job.lostReason });
      return;
    }
    if (job.lostReason === 'cancelled') {
      await this.settle(job, { kind: 'failed', error: { class: 'permanent', code: 'cancelled', message: 'cancelled by its tenant' } });
      return;
    }
    if (!outcome.ok) {
      if (outcome.error.class === 'fatal') {
        await this.fatal(job, outcome.error);
        return;
      }
      await this.settle(job, { kind: 'failed', error: outcome.error });
      return;
    }
    const files = outcome.result.outputs ?? [];
    const storing = files.length > 0;
    // The fence guards outputs becoming visible. A job that returned none has nothing to
    // fence or store: the settle is itself a CAS keyed to this attempt's live lease, so a
    // stale attempt still announces nothing. That saves a control round trip (and an empty
    // output folder) per job.
    if (storing && !(await this.fence(job))) {
      this.events.emit({ type: 'fenced_out', jobId: lease.jobId, attempt: lease.attempt, reason: job.lostReason ?? 'lease not live' });
      return;
    }
    let result: JobResult;
    try {
      let outputs: Record<string, string> = {};
      if (storing) {
        outputs = await this.options.outputStore.put(lease, scratchDir, files);
        this.events.emit({ type: 'output_stored', jobId: lease.jobId, attempt: lease.attempt, outputs });
      }
      result = { ...(outcome.result.data === undefined ? {} : { data: outcome.result.data }), outputs };
    } catch (error) {
      await this.settle(job, { kind: 'failed', error: { class: 'transient', code: 'output_store_failed', message: describe(error) } });
      return;
    }
    await this.settle(job, { kind: 'finished', result });
  }

  /**
   * The fence before any output becomes visible: ask the ledger. If it cannot be asked,
   * trust only the local deadline, which is never later than the ledger's.
   */
  private async fence(job: RunningJob): Promise<boolean> {
    const { lease } = job;
    if (!this.leases.isLocallyLive(lease)) return false;
    try {
      const reply = await this.control.fence({ jobId: lease.jobId, attempt: lease.attempt, token: lease.token, tenant: lease.tenant });
      if (reply.live) return true;
      job.lostReason = reply.reason;
      return false;
    } catch (error) {
      this.options.logger.warn({ jobId: lease.jobId, err: describe(error) }, 'fence check failed; trusting the local lease deadline');
      return this.leases.isLocallyLive(lease);
    }
  }

  private async settle(job: RunningJob, outcome: { kind: 'finished'; result: JobResult } | { kind: 'failed'; error: SerializedError }): Promise<void> {
    const { lease } = job;
    let retried = false;
    for (;;) {
      try {
        const reply = await this.control.settle({ jobId: lease.jobId, attempt: lease.attempt, token: lease.token, tenant: lease.tenant, outcome });
        if (reply.accepted) {
          this.events.emit({ type: 'settled', jobId: lease.jobId, attempt: lease.attempt, state: reply.state, transition: reply.transition });
        } else if (retried && reply.reason === 'ended') {
          // An earlier try of this same settle was applied; its reply was lost on the way.
          this.events.emit({ type: 'settled', jobId: lease.jobId, attempt: lease.attempt, state: 'ended', transition: 'unknown' });
        } else {
          this.events.emit({ type: 'settle_refused', jobId: lease.jobId, attempt: lease.attempt, reason: reply.reason });
        }
        return;
      } catch (error) {
        if (!this.leases.isLocallyLive(lease) || !isRetryable(error)) {
          this.options.logger.warn({ jobId: lease.jobId, err: describe(error) }, 'settle not confirmed; the sweeper will retry the job');
          this.events.emit({ type: 'settle_refused', jobId: lease.jobId, attempt: lease.attempt, reason: 'unconfirmed' });
          return;
        }
        retried = true;
        await sleep(Math.min(500, this.timing.controlTimeoutMs));
      }
    }
  }

  private onProgress(job: RunningJob, fraction: number, message?: string): void {
    const now = this.clock.now();
    if (fraction < 1 && now - job.lastProgressSentAt < this.timing.progressIntervalMs) return;
    job.lastProgressSentAt = now;
    const { lease } = job;
    this.events.emit({ type: 'progress', jobId: lease.jobId, attempt: lease.attempt, fraction });
    this.control
      .progress({ jobId: lease.jobId, attempt: lease.attempt, token: lease.token, tenant: lease.tenant, fraction, ...(message === undefined ? {} : { message }) })
      .then((reply) => {
        if (!reply.accepted) this.loseLease(lease.jobId, lease.attempt, reply.reason);
      })
      .catch(() => undefined); // Progress is advisory; the heartbeat keeps the lease.
  }

  /**
   * A new lease is renewed at once, not at the next tick. Grants that come while such a
   * heartbeat is in flight share the one sent as soon as it returns (it names every
   * lease then held), instead of one heartbeat per grant, each renewing every lease the
   * worker holds (with many slots and short jobs, O(slots) ledger updates per job).
   * Timed heartbeats are not affected.
   */
  private heartbeatAfterGrant(): void {
    if (this.grantHeartbeat !== 'idle') {
      this.grantHeartbeat = 'again';
      return;
    }
    this.grantHeartbeat = 'in_flight';
    void this.heartbeat().finally(() => {
      const again = this.grantHeartbeat === 'again';
      this.grantHeartbeat = 'idle';
      if (again) this.heartbeatAfterGrant();
    });
  }

  /** One heartbeat renews every lease this worker holds. */
  private async heartbeat(): Promise<void> {
    if (this.stopping && this.running.size === 0) return;
    const held = this.leases.all();
    const sentAt = this.clock.now();
    try {
      const reply = await this.control.heartbeat({
        worker: this.id,
        jobTypes: [...this.typesByName.keys()],
        capabilities: [...this.options.capabilities],
        heldBack: this.heldBack,
        slots: this.options.slots,
        leases: held.map(({ jobId, attempt, token, tenant }) => ({ jobId, attempt, token, tenant })),
      });
      for (const { jobId, attempt } of reply.renewed) this.leases.renewed(jobId, attempt, sentAt, this.safeTtl(reply.ttlMs));
      for (const { jobId, attempt, reason } of reply.lost) this.loseLease(jobId, attempt, reason);
      this.events.emit({ type: 'heartbeat', renewed: reply.renewed.length, lost: reply.lost.length });
    } catch (error) {
      if (this.refusedAsWorker(error)) return;
      this.options.logger.warn({ err: describe(error) }, 'heartbeat not answered; leases hold until their local deadlines');
    }
  }

  private checkLocalDeadlines(): void {
    for (const lease of this.leases.expired()) this.loseLease(lease.jobId, lease.attempt, 'local_deadline_passed');
  }

  private loseLease(jobId: string, attempt: number, reason: string): void {
    const job = this.running.get(jobId);
    if (!job || job.lease.attempt !== attempt || job.lostReason) return;
    job.lostReason = reason;
    this.events.emit({ type: 'lease_lost', jobId, attempt, reason });
    this.options.logger.warn({ jobId, attempt, reason }, 'lease lost; stopping the job');
    job.lease.abort.abort(new Error(`lease lost: ${reason}`));
  }

  /**
   * The orchestrator refuses to take this process for a worker of its fleet (a wrong or
   * missing fleet key, or another live process speaking for this worker id): nothing it
   * asks will ever be granted, so it stops as after a Fatal error, saying why.
   */
  private refusedAsWorker(error: unknown): boolean {
    if (!(error instanceof ControlError) || (error.code !== ControlErrorCode.unauthorized && error.code !== ControlErrorCode.workerConflict)) return false;
    void this.fatal(undefined, { class: 'fatal', code: error.code, message: `the orchestrator refuses this worker: ${error.message}` });
    return true;
  }

  /**
   * A Fatal error: this worker is broken. Stop taking work; record the error on the
   * attempt that raised it (if a job raised it) and hand that lease back, with those of
   * the other jobs still running here (their code did not fail), so the next worker starts
   * them at once; then tell the process to exit (onFatal), to be restarted clean. Jobs
   * that already returned settle as usual while the worker drains.
   */
  private async fatal(job: RunningJob | undefined, error: SerializedError): Promise<void> {
    const first = this.fatalError === undefined;
    this.fatalError ??= error;
    if (!first) {
      if (job) await this.handBack(job, error);
      return;
    }
    this.stopping = true;
    this.options.logger.fatal({ error }, 'fatal error: the worker hands back its leases and stops');
    this.stopTimers();
    void this.cancelSubscriptions();
    const others = [...this.running.values()].filter((other) => other !== job && !other.returned);
    await Promise.all([
      ...(job ? [this.handBack(job, error)] : []),
      ...others.map((other) => this.handBack(other, workerStopped(`the worker stopped on the Fatal error ${error.code}`))),
    ]);
    this.events.emit({ type: 'fatal', error });
    this.options.onFatal?.(error);
  }

  /** Hands back the lease of every job still running here (stopping). */
  private async handBackAll(why: string): Promise<void> {
    await Promise.all([...this.running.values()].filter((job) => !job.returned).map((job) => this.handBack(job, workerStopped(why))));
  }

  /**
   * Gives a lease back to the ledger before its end (release): the attempt ends with
   * `error` recorded and the next one is due at once, instead of a lease TTL later. The
   * job's process is aborted; whatever it still returns is dropped. If the orchestrator
   * cannot be reached the lease simply runs out, as after a crash. Once per job.
   */
  private handBack(job: RunningJob, error: SerializedError): Promise<void> {
    job.handingBack ??= (async () => {
      const { lease } = job;
      job.lostReason = handedBack;
      lease.abort.abort(new Error(`the job is handed back: ${error.message}`));
      try {
        const reply = await this.control.release({ jobId: lease.jobId, attempt: lease.attempt, token: lease.token, tenant: lease.tenant, error });
        this.events.emit({ type: 'handed_back', jobId: lease.jobId, attempt: lease.attempt, code: error.code, outcome: reply.accepted ? reply.transition : `refused ${reply.reason}` });
      } catch (err) {
        this.options.logger.warn({ jobId: lease.jobId, err: describe(err) }, 'lease not handed back; it runs out instead');
        this.events.emit({ type: 'handed_back', jobId: lease.jobId, attempt: lease.attempt, code: error.code, outcome: 'unconfirmed' });
      }
    })();
    return job.handingBack;
  }

  /** With no free slot, stop consuming: after ack-early the prefetch no longer bounds what arrives. */
  private async updateFlowControl(): Promise<void> {
    if (this.stopping) return;
    const wanted = this.admission.hasFreeSlot;
    if (wanted === this.consuming) return;
    this.consuming = wanted;
    await Promise.allSettled(this.subscriptions.map((s) => (wanted ? s.resume() : s.pause())));
  }
}

function parseWorkMessage(delivery: Delivery): WorkMessage | undefined {
  try {
    const body = JSON.parse(delivery.body.toString('utf8')) as Partial<WorkMessage>;
    if (typeof body.jobId !== 'string' || typeof body.type !== 'string' || typeof body.tenant !== 'string') return undefined;
    if (!Number.isInteger(body.attempt) || (body.attempt as number) < 1) return undefined;
    // The tenant travels on every message (G8): one without it, or with another, is not planrun's.
    if (delivery.headers[tenantHeader] !== body.tenant) return undefined;
    return body as WorkMessage;
  } catch {
    return undefined;
  }
}

function isRetryable(error: unknown): boolean {
  return isBrokerError(error, 'timeout') || isBrokerError(error, 'disconnected');
}

function describe(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
