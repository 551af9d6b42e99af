import type { Logger } from 'pino';
import type { DispatchReport, Ledger } from '../ledger/ledger.js';
import { Loop } from './loop.js';

/**
 * Runs the ledger's dispatch pass (ledger/operations/dispatch.ts) every interval and
 * whenever something may have freed or asked for capacity (a submit, a settle, a
 * heartbeat: `wake`; wakes that come during a pass make one more pass, not one each).
 * A pass first sweeps (expired leases become the next attempt, or end the job; lost work
 * messages are sent again), then, in fair mode, releases the work messages of waiting
 * jobs the fleet's free slots and the limits allow. It wakes the relay when a pass wrote
 * to the outbox.
 *
 * A work message is sent again only for the types `redispatchTypes` names (those with
 * a worker standing idle): an unleased message of a type whose workers are all busy, or
 * gone, is only waiting in the queue, and a copy per job per period would pile up there
 * for as long as the backlog lasts.
 */
/**
 * One round waiting in the broker per slot: a worker that finishes a job finds the next
 * there, instead of idling while the settle, a dispatch pass and the relay bring it (with
 * none ahead, quick jobs ran a third slower). Fairness gives up at most that round.
 */
export const defaultAheadPerSlot = 1;

/** A wake waits this long, so that one pass serves the settles and heartbeats of a burst. */
const wakeCoalesceMs = 5;

export class Dispatcher {
  private readonly loop: Loop;
  private wakeTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly ledger: Ledger,
    private readonly logger: Logger,
    intervalMs: number,
    /** The window of the fleet whose slots are offered (the orchestrator's fleet window). */
    private readonly fleetWindowMs: number,
    private readonly onChange: (report: DispatchReport) => void,
    private readonly redispatchTypes: () => readonly string[] | undefined = () => undefined,
  ) {
    this.loop = new Loop('dispatcher', logger, async () => {
      await this.runOnce();
      return intervalMs;
    });
  }

  start(): void {
    this.loop.start();
  }

  /** Asks for a pass soon (within a few milliseconds, or right after the one under way). */
  wake(): void {
    this.wakeTimer ??= setTimeout(() => {
      this.wakeTimer = undefined;
      this.loop.wake();
    }, wakeCoalesceMs);
  }

  stop(): Promise<void> {
    clearTimeout(this.wakeTimer);
    this.wakeTimer = undefined;
    return this.loop.stop();
  }

  async runOnce(): Promise<DispatchReport> {
    const redispatchTypes = this.redispatchTypes();
    const report = await this.ledger.dispatch({
      fleetWindowMs: this.fleetWindowMs,
      aheadPerSlot: defaultAheadPerSlot,
      ...(redispatchTypes === undefined ? {} : { redispatchTypes }),
    });
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
