import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import type { DispatchReport, Ledger } from '../ledger/ledger.js';
import { Loop } from './loop.js';

/**
 * One round waiting in the broker per slot: a worker that finishes a job finds the next
 * there, instead of idling while the settle, a dispatch pass and the relay bring it (with
 * none ahead, quick jobs ran a third slower). Fairness gives up at most that round.
 */
export const defaultAheadPerSlot = 1;

/**
 * How long a wake waits for others, so that one pass serves the settles of a burst, by
 * what the last pass left waiting. Nothing: a lone submit is released at once (its pass
 * right after the turn that woke it). Jobs held back by a limit or a concurrency key: a
 * few milliseconds. Jobs that wait only for slots, each slot with a job released ahead
 * of it: longer, since a slot that ends its job takes the next from the broker, and a
 * pass only refills the round ahead.
 */
export const wakeCoalesceMs = { nothingWaiting: 0, heldBack: 5, slotsFull: 20 } as const;

/**
 * Runs the ledger's dispatch pass (ledger/operations/dispatch.ts): every interval a whole
 * pass, which first sweeps (expired leases become the next attempt, or end the job; lost
 * work messages are sent again) and then, in fair mode, releases the work messages of
 * waiting jobs the fleet's free slots and the limits allow; and, between those, a pass that
 * only releases whenever something may have freed or asked for capacity (`wake`: a submit,
 * a settle, a release, a worker that joined or changed its offer; wakes that come during a
 * pass make one more pass, not one each). It wakes the relay when a pass wrote to the
 * outbox.
 *
 * A work message is sent again only for the types `redispatchTypes` names (those with
 * a worker standing idle): an unleased message of a type whose workers are all busy, or
 * gone, is only waiting in the queue, and a copy per job per period would pile up there
 * for as long as the backlog lasts.
 */
export class Dispatcher {
  private readonly loop: Loop;
  private wakeTimer: NodeJS.Timeout | undefined;
  private wakeImmediate: NodeJS.Immediate | undefined;
  /** When the next pass sweeps (performance.now()). */
  private sweepAt = 0;
  /** What the last pass left waiting: decides how long a wake waits for others. */
  private lastPass: Pick<DispatchReport, 'waiting' | 'slotsFull'> = { waiting: false, slotsFull: false };

  constructor(
    private readonly ledger: Ledger,
    private readonly logger: Logger,
    private readonly intervalMs: number,
    /** The window of the fleet whose slots are offered (the orchestrator's fleet window). */
    private readonly fleetWindowMs: number,
    private readonly onChange: (report: DispatchReport) => void,
    private readonly redispatchTypes: () => readonly string[] | undefined = () => undefined,
    /**
     * Called as a pass is asked of the ledger, before it commits: where the writes of a turn
     * commit together, a write asked for now (the relay's claim of the work it releases)
     * joins its transaction and sees its rows.
     */
    private readonly onPassAsked: () => void = () => undefined,
  ) {
    this.loop = new Loop('dispatcher', logger, async () => {
      const sweep = performance.now() >= this.sweepAt;
      if (sweep) this.sweepAt = performance.now() + this.intervalMs;
      await this.pass(sweep);
      return Math.max(1, this.sweepAt - performance.now());
    });
  }

  start(): void {
    this.loop.start();
  }

  /** Asks for a pass that releases what it can: after this turn, or a few milliseconds (see wakeCoalesceMs); or right after the one under way. */
  wake(): void {
    if (this.wakeTimer || this.wakeImmediate) return;
    const { waiting, slotsFull } = this.lastPass;
    const waitMs = !waiting ? wakeCoalesceMs.nothingWaiting : slotsFull ? wakeCoalesceMs.slotsFull : wakeCoalesceMs.heldBack;
    const run = () => {
      this.wakeTimer = undefined;
      this.wakeImmediate = undefined;
      this.loop.wake();
    };
    if (waitMs === 0) this.wakeImmediate = setImmediate(run);
    else this.wakeTimer = setTimeout(run, waitMs);
  }

  /**
   * Like `wake`, but when the last pass left nothing waiting the pass is asked for in this
   * turn: after a write the caller has just asked for and not yet awaited (a submit), where
   * the writes of a turn commit together, the pass joins that transaction and sees the write.
   */
  wakeInThisTurn(): void {
    if (this.lastPass.waiting || this.wakeTimer || this.wakeImmediate) return this.wake();
    this.loop.wake();
  }

  stop(): Promise<void> {
    clearTimeout(this.wakeTimer);
    if (this.wakeImmediate) clearImmediate(this.wakeImmediate);
    this.wakeTimer = undefined;
    this.wakeImmediate = undefined;
    return this.loop.stop();
  }

  /** A whole pass, now: the sweep, then the release. */
  runOnce(): Promise<DispatchReport> {
    return this.pass(true);
  }

  private async pass(sweep: boolean): Promise<DispatchReport> {
    const redispatchTypes = sweep ? this.redispatchTypes() : undefined;
    const asked = this.ledger.dispatch({
      fleetWindowMs: this.fleetWindowMs,
      aheadPerSlot: defaultAheadPerSlot,
      sweep,
      ...(redispatchTypes === undefined ? {} : { redispatchTypes }),
    });
    this.onPassAsked();
    const report = await asked;
    this.lastPass = { waiting: report.waiting, slotsFull: report.slotsFull };
    const swept = report.abandoned.length + report.requeued.length + report.exhausted.length + report.cancelled.length + report.redispatched.length;
    if (swept > 0) {
      this.logger.info(
        {
          abandoned: report.abandoned.length,
          requeued: report.requeued.length,
          exhausted: report.exhausted.length,
          cancelled: report.cancelled.length,
          redispatched: report.redispatched.length,
        },
        'sweep',
      );
    }
    if (swept + report.released.length > 0) this.onChange(report);
    return report;
  }
}
