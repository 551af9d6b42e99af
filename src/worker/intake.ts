import type { Logger } from 'pino';
import { isBrokerError, type Broker, type Delivery, type Subscription } from '../broker/broker.js';
import type { Clock } from '../core/clock.js';
import type { LeaseReply } from '../control/protocol.js';
import type { WorkMessage } from '../ledger/ledger.js';
import { tenantHeader, type Topology } from '../topology.js';
import { Admission } from './admission.js';
import type { ControlClient } from './control-client.js';
import { DedupMemory } from './dedup.js';
import { describeError } from './describe-error.js';
import type { LeaseBook } from './lease-book.js';
import type { JobType } from './runner/job-type.js';
import type { LateGrantUnused, WorkerEvents } from './worker-events.js';

/** How often a worker whose work queue is not declared yet looks again. */
const declaredQueuePollMs = 500;

/** A lease won for a work message: what it takes to run the attempt. */
export interface Grant {
  work: WorkMessage;
  type: JobType;
  reply: Extract<LeaseReply, { granted: true }>;
  /** When the lease request was sent: the lease's local deadline counts from then. */
  sentAt: number;
  /** Granted after the worker had stopped waiting for the answer (see useLateGrant). */
  late: boolean;
}

/** What intake asks of the worker it feeds. */
export interface IntakeHost {
  /** The attempt of `jobId` running on this worker, if one is. */
  runningAttempt(jobId: string): number | undefined;
  /** Runs a granted attempt; `release` frees its admission slot, and is called once the attempt is over. */
  start(grant: Grant, release: () => void): void;
  /** A lease request failed: the worker stops if the orchestrator refuses it as a worker. */
  leaseFailed(error: unknown): void;
}

export interface IntakeOptions {
  broker: Broker;
  topology: Topology;
  workerId: string;
  /** The job types this worker offers, by name: their queues are the ones consumed. */
  types: ReadonlyMap<string, JobType>;
  slots: number;
  scratchRoot: string;
  freeBytes?: ((path: string) => Promise<number>) | undefined;
  /** Disk reserved for a job type that declares none. */
  defaultOutputReserveBytes: number;
  /** How long a message this worker cannot take now is held before it goes back. */
  redeliveryDelayMs: number;
  control: ControlClient;
  /** Only read, to tell whether a late grant is still live by the local clock. */
  leases: LeaseBook;
  events: WorkerEvents;
  logger: Logger;
  clock: Clock;
  host: IntakeHost;
}

/**
 * How work comes in: consumes the work queues of the offered types, drops what is
 * malformed or already here, admits a delivery only with a free slot and the disk for its
 * outputs, leases its job, acks the message as soon as the ledger answered (ack-early),
 * and hands a granted lease to the worker. What it cannot take now goes back to the
 * broker after `redeliveryDelayMs`, or takes the next slot that frees within that time;
 * with no free slot it stops consuming (flow control).
 */
export class Intake {
  private readonly admission: Admission;
  private readonly dedup = new DedupMemory(10_000);
  private subscriptions: Subscription[] = [];
  private consuming = false;
  private isClosed = false;
  private readonly pendingTimers = new Set<NodeJS.Timeout>();
  /**
   * Deliveries that found every slot taken, oldest first: each takes the next slot that
   * frees, or goes back to the broker after `redeliveryDelayMs` as before (see waitForSlot).
   */
  private readonly slotWaiters: Array<{ delivery: Delivery; timer: NodeJS.Timeout }> = [];

  constructor(private readonly options: IntakeOptions) {
    this.admission = new Admission(options.slots, options.scratchRoot, options.freeBytes, () => options.clock.now());
  }

  /** No more work is taken (the worker stops); deliveries still coming are given back. */
  get closed(): boolean {
    return this.isClosed;
  }

  /**
   * Declares and consumes the work queue of every offered type. A broker user that may
   * not declare queues (a least-privilege worker, docs/security.md) consumes the queue
   * the orchestrator declares: at once if it exists, else as soon as the orchestrator,
   * hearing this worker's first heartbeat, has declared it.
   */
  async open(): Promise<void> {
    const { broker, topology, types } = this.options;
    this.consuming = true;
    for (const type of types.values()) {
      const queue = topology.workQueue(type.name);
      try {
        await broker.declareQueue(queue);
      } catch (error) {
        if (!isBrokerError(error, 'refused')) throw error;
        this.options.logger.info({ queue }, "this broker user may not declare the work queue: consuming the orchestrator's");
      }
      await this.consumeWhenDeclared(queue);
    }
  }

  /** Consumes `queue`, or, while it does not exist, tries again every `declaredQueuePollMs` in the background. */
  private async consumeWhenDeclared(queue: string): Promise<void> {
    if (this.isClosed) return;
    let subscription: Subscription;
    try {
      subscription = await this.options.broker.consume(queue, (delivery) => this.onDelivery(delivery), { prefetch: this.options.slots });
    } catch (error) {
      if (!isBrokerError(error, 'not_found')) throw error;
      this.options.logger.info({ queue }, 'waiting for the orchestrator to declare the work queue');
      const timer = setTimeout(() => {
        this.pendingTimers.delete(timer);
        this.consumeWhenDeclared(queue).catch((retryError: unknown) =>
          this.options.logger.error({ err: retryError, queue }, 'cannot consume the work queue; this worker takes no work of its type'),
        );
      }, declaredQueuePollMs);
      this.pendingTimers.add(timer);
      return;
    }
    if (this.isClosed) {
      await subscription.cancel();
      return;
    }
    this.subscriptions.push(subscription);
    // Flow control may have paused the others while this queue was awaited.
    if (!this.consuming) await subscription.pause();
  }

  /** Takes no more work: the subscriptions are cancelled. */
  async close(): Promise<void> {
    this.isClosed = true;
    const subscriptions = this.subscriptions;
    this.subscriptions = [];
    this.consuming = false;
    await Promise.allSettled(subscriptions.map((s) => s.cancel()));
  }

  /**
   * The lease of this attempt was superseded here: its grant was abandoned (or the job
   * moved on), so a work message for the same attempt sent again is new work, not a copy.
   */
  forgetSuperseded(jobId: string, attempt: number): void {
    this.dedup.forget(jobId, attempt);
  }

  /** Forgets the deliveries held back, timers and all; cancelling the subscriptions hands their messages back. */
  dropWaiting(): void {
    for (const timer of this.pendingTimers) clearTimeout(timer);
    this.pendingTimers.clear();
    this.slotWaiters.length = 0;
  }

  private async onDelivery(delivery: Delivery): Promise<void> {
    const { events, logger, host } = this.options;
    const work = parseWorkMessage(delivery);
    if (!work) {
      // Nobody could ever run it; the ledger re-sends any real job whose message is lost.
      logger.error({ messageId: delivery.messageId }, 'malformed work message dropped');
      delivery.nack({ requeue: false });
      return;
    }
    const type = this.options.types.get(work.type);
    if (this.isClosed || !type) {
      this.giveBack(delivery);
      return;
    }
    const local = host.runningAttempt(work.jobId);
    if (local !== undefined && local !== work.attempt) {
      // Another attempt of this job is still winding down here: let another worker (or later) take this one.
      this.giveBack(delivery);
      return;
    }
    if (local !== undefined && this.options.leases.get(work.jobId)?.takenUp === false) {
      // Its grant is not taken up yet, and may have been abandoned and this message sent
      // again for the same attempt: held back, it comes back once the ledger has said which.
      this.giveBack(delivery);
      return;
    }
    if (local !== undefined || this.dedup.has(work.jobId, work.attempt)) {
      events.emit({ type: 'duplicate_dropped', jobId: work.jobId, attempt: work.attempt });
      delivery.ack();
      return;
    }
    const admissionKey = `${work.jobId}@${work.attempt}`;
    const decision = await this.admission.admit(admissionKey, this.reserveOf(type));
    if (!decision.admitted) {
      events.emit({ type: 'admission_refused', jobId: work.jobId, attempt: work.attempt, reason: decision.reason });
      logger.info({ jobId: work.jobId, reason: decision.reason, detail: decision.detail }, 'not admitted; message goes back');
      if (decision.reason === 'no_free_slot') this.waitForSlot(delivery);
      else this.giveBack(delivery);
      return;
    }
    this.dedup.remember(work.jobId, work.attempt);
    void this.updateFlowControl();
    const release = this.releaser(admissionKey);
    try {
      const sentAt = this.options.clock.now();
      const reply = await this.options.control.lease(
        { jobId: work.jobId, attempt: work.attempt, tenant: work.tenant, worker: this.options.workerId },
        (late) => void this.useLateGrant({ work, type, reply: late, sentAt, late: true }),
      );
      // Ack-early: granted or refused, the broker is done with this message now.
      delivery.ack();
      if (!reply.granted) {
        events.emit({ type: 'lease_refused', jobId: work.jobId, attempt: work.attempt, reason: reply.reason });
        release();
        return;
      }
      if (host.runningAttempt(work.jobId) === work.attempt) {
        // A late grant of an earlier request for this very attempt is running it already (the same lease, renewed).
        events.emit({ type: 'duplicate_dropped', jobId: work.jobId, attempt: work.attempt });
        release();
        return;
      }
      host.start({ work, type, reply, sentAt, late: false }, release);
    } catch (error) {
      // The orchestrator did not answer: keep nothing, ack nothing; the message comes back.
      this.dedup.forget(work.jobId, work.attempt);
      release();
      host.leaseFailed(error);
      logger.warn({ jobId: work.jobId, err: describeError(error) }, 'lease request failed; message goes back');
      this.giveBack(delivery);
    }
  }

  /**
   * A lease granted after this worker stopped waiting for it (the orchestrator had taken
   * the request before a cut and answered after it): run the job if it still can: not
   * stopping, not running it already (a redelivery of the same message may have been
   * leased here again), a free slot, and the lease not near its end by the local clock,
   * counted from when the request was sent. Otherwise the lease runs out unused, as before.
   */
  private async useLateGrant(grant: Grant): Promise<void> {
    const { work, type, reply, sentAt } = grant;
    const { events, logger, clock, leases, host } = this.options;
    const unusable = (): LateGrantUnused | undefined => {
      if (this.isClosed) return 'stopping';
      if (host.runningAttempt(work.jobId) !== undefined) return 'running';
      if (clock.now() >= leases.deadlineFor(sentAt, reply.ttlMs)) return 'lease_near_end';
      return undefined;
    };
    const unused = (reason: LateGrantUnused) => events.emit({ type: 'late_grant_unused', jobId: work.jobId, attempt: work.attempt, reason });
    const before = unusable();
    if (before) return unused(before);
    // A key of its own: a redelivery of the same message may hold `<job>@<attempt>` right now.
    const admissionKey = `${work.jobId}@${work.attempt}/late`;
    let decision;
    try {
      decision = await this.admission.admit(admissionKey, this.reserveOf(type));
    } catch (error) {
      logger.warn({ jobId: work.jobId, err: describeError(error) }, 'late lease grant not used: admission failed');
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
    host.start(grant, release);
  }

  private reserveOf(type: JobType): number {
    return type.outputReserveBytes ?? this.options.defaultOutputReserveBytes;
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

  /** Holds the message briefly, then gives it back for this or another worker. */
  private giveBack(delivery: Delivery): void {
    const timer = setTimeout(() => {
      this.pendingTimers.delete(timer);
      delivery.nack({ requeue: true });
    }, this.options.redeliveryDelayMs);
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
      }, this.options.redeliveryDelayMs),
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

  /** With no free slot, stop consuming: after ack-early the prefetch no longer bounds what arrives. */
  private async updateFlowControl(): Promise<void> {
    if (this.isClosed) return;
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
