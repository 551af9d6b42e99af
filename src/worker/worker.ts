import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Broker } from '../broker/broker.js';
import { type Clock, systemClock } from '../core/clock.js';
import { type SerializedError } from '../core/errors.js';
import { defaultTopology, type Topology } from '../topology.js';
import { ControlErrorCode, type HeldBackType } from '../control/protocol.js';
import { Attempt, type AttemptContext, type JobRunner } from './attempt.js';
import { ControlClient, ControlError, newWorkerSecret } from './control-client.js';
import { describeError } from './describe-error.js';
import { defaultInputFetching, type InputFetching } from './inputs/job-inputs.js';
import { Intake, type Grant } from './intake.js';
import { LeaseBook } from './lease-book.js';
import { offeredTypes } from './offered-types.js';
import type { OutputStore } from './output-store.js';
import type { JobType } from './runner/job-type.js';
import { WorkerEvents, type LeaseLossReason, type WorkerEvent } from './worker-events.js';

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
  /** How inputs named by URL are fetched (size cap, stall timeout); defaultInputFetching unless given. */
  inputFetching?: Partial<InputFetching>;
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
  /** What a job prints is sent to the orchestrator at least this often (sooner when 64 KiB wait). */
  logFlushMs: number;
}

export const defaultWorkerTiming: WorkerTiming = {
  heartbeatIntervalMs: 30_000,
  controlTimeoutMs: 5_000,
  lateGrantWindowMs: 60_000,
  redeliveryDelayMs: 1_000,
  leaseSafetyFraction: 0.1,
  deadlineCheckIntervalMs: 250,
  progressIntervalMs: 1_000,
  logFlushMs: 250,
};

export const defaultOutputReserveBytes = 64 * 1024 * 1024;

/** What a job handed back for no fault of its own records on its attempt. */
function workerStopped(why: string): SerializedError {
  return { class: 'transient', code: 'worker_stopped', message: `the worker stopped before the job ended (${why}); handed back for its next attempt` };
}

/**
 * A worker: takes work messages, leases each job in the ledger, acks the message at
 * once, runs the job in a child process while its heartbeat keeps the lease, stores the
 * outputs only after the fence says the lease is still its own, then settles.
 *
 * This class coordinates: it starts and stops, keeps every lease with one heartbeat,
 * watches the local deadlines, and stops on a Fatal error. Intake (intake.ts) brings the
 * work in and wins the leases; an Attempt (attempt.ts) lives each one to its end.
 */
export class Worker {
  readonly id: string;
  private readonly clock: Clock;
  private readonly timing: WorkerTiming;
  private readonly control: ControlClient;
  private readonly leases: LeaseBook;
  private readonly events = new WorkerEvents();
  private readonly intake: Intake;
  private readonly attemptContext: AttemptContext;
  /** The attempts running here, by job id (one per job: intake lets no second one in). */
  private readonly running = new Map<string, Attempt>();
  private readonly typesByName: Map<string, JobType>;
  private readonly heldBack: HeldBackType[];
  private stopped: Promise<void> | undefined;
  private fatalError: SerializedError | undefined;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private deadlineTimer: NodeJS.Timeout | undefined;
  /** A heartbeat asked for by a grant is in flight / another one is wanted after it (see heartbeatAfterGrant). */
  private grantHeartbeat: 'idle' | 'in_flight' | 'again' = 'idle';
  private idle: (() => void) | undefined;

  constructor(private readonly options: WorkerOptions) {
    this.id = options.workerId ?? `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
    this.clock = options.clock ?? systemClock;
    this.timing = { ...defaultWorkerTiming, ...options.timing };
    const topology = options.topology ?? defaultTopology;
    this.control = new ControlClient(options.broker, topology, this.timing.controlTimeoutMs, this.timing.lateGrantWindowMs, {
      secret: newWorkerSecret(),
      fleetKey: options.fleetKey,
    });
    this.leases = new LeaseBook(this.clock, this.timing.leaseSafetyFraction);
    const { offered, heldBack } = offeredTypes(options.jobTypes, options.capabilities);
    this.typesByName = new Map(offered.map((type) => [type.name, type]));
    this.heldBack = heldBack;
    this.intake = new Intake({
      broker: options.broker,
      topology,
      workerId: this.id,
      types: this.typesByName,
      slots: options.slots,
      scratchRoot: options.scratchRoot,
      freeBytes: options.freeBytes,
      defaultOutputReserveBytes: options.defaultOutputReserveBytes ?? defaultOutputReserveBytes,
      redeliveryDelayMs: this.timing.redeliveryDelayMs,
      control: this.control,
      leases: this.leases,
      events: this.events,
      logger: options.logger,
      clock: this.clock,
      host: {
        runningAttempt: (jobId) => this.running.get(jobId)?.lease.attempt,
        start: (grant, release) => this.startAttempt(grant, release),
        leaseFailed: (error) => void this.refusedAsWorker(error),
      },
    });
    for (const { type, missing } of heldBack) {
      options.logger.warn({ type, missing }, 'job type not offered: this worker lacks a capability it requires');
    }
    this.attemptContext = {
      control: this.control,
      leases: this.leases,
      runner: options.runner,
      outputStore: options.outputStore,
      scratchRoot: options.scratchRoot,
      defaultOutputReserveBytes: options.defaultOutputReserveBytes ?? defaultOutputReserveBytes,
      inputFetching: { ...defaultInputFetching, ...options.inputFetching },
      events: this.events,
      logger: options.logger,
      clock: this.clock,
      progressIntervalMs: this.timing.progressIntervalMs,
      logFlushMs: this.timing.logFlushMs,
      controlTimeoutMs: this.timing.controlTimeoutMs,
      fatal: (attempt, error) => this.fatal(attempt, error),
      forget: (attempt) => this.running.delete(attempt.lease.jobId),
    };
  }

  onEvent(listener: (event: WorkerEvent) => void): () => void {
    return this.events.on(listener);
  }

  get runningJobs(): number {
    return this.running.size;
  }

  async start(): Promise<void> {
    await this.intake.open();
    this.heartbeatTimer = setInterval(() => void this.heartbeat(), this.timing.heartbeatIntervalMs);
    this.deadlineTimer = setInterval(() => this.checkLocalDeadlines(), this.timing.deadlineCheckIntervalMs);
    void this.heartbeat();
    this.options.logger.info({ worker: this.id, types: [...this.typesByName.keys()], slots: this.options.slots }, 'worker started');
  }

  /**
   * Graceful stop: take no more work, let running jobs finish until `deadlineMs`, then
   * hand back the leases of those still running (see Attempt.handBack) and abort them, so
   * the next worker starts them at once instead of a lease TTL later.
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
    await this.intake.close();
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
    this.intake.dropWaiting();
  }

  /** A lease was won: its attempt runs, and its admission slot is freed once the attempt is over. */
  private startAttempt({ work, type, reply, sentAt, late }: Grant, release: () => void): void {
    const lease = this.leases.add(
      { jobId: work.jobId, attempt: work.attempt, token: reply.token, tenant: work.tenant, ...(reply.store ? { store: reply.store } : {}) },
      sentAt,
      reply.ttlMs,
    );
    const attempt = new Attempt(this.attemptContext, lease, type);
    this.running.set(work.jobId, attempt);
    this.events.emit({ type: 'lease_granted', jobId: work.jobId, attempt: work.attempt, token: reply.token, ...(late ? { late: true as const } : {}) });
    this.heartbeatAfterGrant();
    void attempt.run(reply.input, { timeoutSeconds: reply.timeoutSeconds, limits: reply.limits }).finally(() => {
      if (this.running.size === 0) this.idle?.();
      release();
    });
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
    if (this.intake.closed && this.running.size === 0) return;
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
      for (const { jobId, attempt } of reply.renewed) this.leases.renewed(jobId, attempt, sentAt, reply.ttlMs);
      for (const { jobId, attempt, reason } of reply.lost) this.loseLease(jobId, attempt, reason);
      this.events.emit({ type: 'heartbeat', renewed: reply.renewed.length, lost: reply.lost.length });
    } catch (error) {
      if (this.refusedAsWorker(error)) return;
      this.options.logger.warn({ err: describeError(error) }, 'heartbeat not answered; leases hold until their local deadlines');
    }
  }

  private checkLocalDeadlines(): void {
    for (const lease of this.leases.expired()) this.loseLease(lease.jobId, lease.attempt, 'local_deadline_passed');
  }

  private loseLease(jobId: string, attempt: number, reason: LeaseLossReason): void {
    const running = this.running.get(jobId);
    if (running?.lease.attempt === attempt) running.lose(reason);
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
  private async fatal(attempt: Attempt | undefined, error: SerializedError): Promise<void> {
    const first = this.fatalError === undefined;
    this.fatalError ??= error;
    if (!first) {
      if (attempt) await attempt.handBack(error);
      return;
    }
    this.options.logger.fatal({ error }, 'fatal error: the worker hands back its leases and stops');
    this.stopTimers();
    void this.intake.close();
    const others = [...this.running.values()].filter((other) => other !== attempt && !other.returned);
    await Promise.all([
      ...(attempt ? [attempt.handBack(error)] : []),
      ...others.map((other) => other.handBack(workerStopped(`the worker stopped on the Fatal error ${error.code}`))),
    ]);
    this.events.emit({ type: 'fatal', error });
    this.options.onFatal?.(error);
  }

  /** Hands back the lease of every job still running here (stopping). */
  private async handBackAll(why: string): Promise<void> {
    await Promise.all([...this.running.values()].filter((attempt) => !attempt.returned).map((attempt) => attempt.handBack(workerStopped(why))));
  }
}
