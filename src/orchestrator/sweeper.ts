import type { Logger } from 'pino';
import type { Ledger, SweepReport } from '../ledger/ledger.js';
import { Loop } from './loop.js';

/**
 * Runs the ledger's sweep every interval: expired leases become the next attempt (or
 * end the job), lost work messages are sent again. It wakes the relay when a pass wrote
 * to the outbox.
 *
 * A work message is sent again only for the types `redispatchTypes` names (those with
 * a worker standing idle): an unleased message of a type whose workers are all busy, or
 * gone, is only waiting in the queue, and a copy per job per period would pile up there
 * for as long as the backlog lasts.
 */
export class Sweeper {
  private readonly loop: Loop;

  constructor(
    private readonly ledger: Ledger,
    private readonly logger: Logger,
    intervalMs: number,
    private readonly onChange: (report: SweepReport) => void,
    private readonly redispatchTypes: () => readonly string[] | undefined = () => undefined,
  ) {
    this.loop = new Loop('sweeper', logger, async () => {
      await this.runOnce();
      return intervalMs;
    });
  }

  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  async runOnce(): Promise<SweepReport> {
    const redispatchTypes = this.redispatchTypes();
    const report = await this.ledger.sweep(redispatchTypes === undefined ? {} : { redispatchTypes });
    const changed = report.requeued.length + report.exhausted.length + report.cancelled.length + report.redispatched.length;
    if (changed > 0) {
      this.logger.info(
        {
          requeued: report.requeued.length,
          exhausted: report.exhausted.length,
          cancelled: report.cancelled.length,
          redispatched: report.redispatched.length,
        },
        'sweep',
      );
      this.onChange(report);
    }
    return report;
  }
}
