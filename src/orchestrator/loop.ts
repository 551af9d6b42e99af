import type { Logger } from 'pino';

/**
 * Runs `round` again and again, waiting as long as it asks between rounds, until
 * stopped. `wake` cuts a wait short. A round that throws is logged and retried after a
 * second: a background loop must not die of one bad moment.
 */
export class Loop {
  private running = false;
  private done: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private wakeUp: (() => void) | undefined;
  private woken = false;

  constructor(
    private readonly name: string,
    private readonly logger: Logger,
    /** Returns how many milliseconds to wait before the next round. */
    private readonly round: () => Promise<number>,
  ) {}

  start(): void {
    if (this.running) return;
    this.running = true;
    this.done = this.run();
  }

  wake(): void {
    this.woken = true;
    this.wakeUp?.();
  }

  async stop(): Promise<void> {
    this.running = false;
    this.wake();
    await this.done;
  }

  private async run(): Promise<void> {
    while (this.running) {
      let waitMs: number;
      this.woken = false;
      try {
        waitMs = await this.round();
      } catch (error) {
        this.logger.error({ err: error }, `${this.name} round failed`);
        waitMs = 1000;
      }
      if (!this.running) break;
      if (this.woken || waitMs <= 0) continue;
      await new Promise<void>((resolve) => {
        this.wakeUp = resolve;
        this.timer = setTimeout(resolve, waitMs);
      });
      clearTimeout(this.timer);
      this.wakeUp = undefined;
    }
  }
}
