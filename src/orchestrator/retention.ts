import { rm } from 'node:fs/promises';
import { join, relative, resolve, sep } from 'node:path';
import type { Logger } from 'pino';
import type { Clock } from '../core/clock.js';
import type { Ledger, PrunableJob } from '../ledger/ledger.js';
import { Loop } from './loop.js';
import type { S3OutputStore } from './object-store.js';

/** How long an ended job is kept by default (`--retain`): 14 days. */
export const defaultRetainMs = 14 * 24 * 3_600_000;

export interface RetentionOptions {
  /** How long after it ended a job is deleted (`--retain`). */
  retainMs: number;
  /** Between passes; default a tenth of `retainMs`, between 100 ms and a minute. */
  intervalMs?: number;
  /** Jobs per batch (default 100): each batch is one short ledger transaction. */
  batch?: number;
  /** Batches per pass at most (default 10), so that one pass stays bounded. */
  batchesPerPass?: number;
}

/** Where the outputs of pruned jobs are removed from. */
export interface RetentionStores {
  /** The folder store this orchestrator can reach (`<output-dir>/<tenant>/<job>/` goes with the job). */
  outputDir?: string;
  /** The object store (`--store`): the delivered attempt's prefix goes with the job. */
  objectStore?: S3OutputStore;
}

/**
 * The retention pass (issue 14): deletes ended jobs older than the retention period, in
 * small batches, with every ledger row that names them and their stored outputs. A job's
 * result message is never affected: a job is pruned only once its result message went out
 * (the ledger's findPrunableJobs), and the message, once published, is the app's.
 *
 * Each batch finds candidates, removes their outputs, then prunes them in one transaction
 * that reads them again, locked (rows another orchestrator's pass holds are skipped): so
 * several orchestrators run it at once as they run the other passes, with no leader
 * (docs/high-availability.md). Two passes may remove the same job's outputs, which is
 * harmless; its rows are deleted, and counted, once. Outputs go first, so a pass that dies
 * between the two leaves rows to find again, never files no row names.
 */
export class RetentionPass {
  private readonly loop: Loop;
  private readonly batch: number;
  private readonly batchesPerPass: number;

  constructor(
    private readonly ledger: Ledger,
    private readonly stores: RetentionStores,
    private readonly logger: Logger,
    private readonly clock: Clock,
    private readonly options: RetentionOptions,
    private readonly pruned: (n: number) => void,
  ) {
    this.batch = options.batch ?? 100;
    this.batchesPerPass = options.batchesPerPass ?? 10;
    const intervalMs = options.intervalMs ?? Math.min(60_000, Math.max(100, Math.floor(options.retainMs / 10)));
    this.loop = new Loop('retention', logger, async () => {
      await this.pass();
      return intervalMs;
    });
  }

  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** One pass: batches until one comes back short (or `batchesPerPass`); answers how many jobs it deleted. */
  async pass(): Promise<number> {
    let deleted = 0;
    for (let n = 0; n < this.batchesPerPass; n++) {
      const endedBefore = this.clock.now() - this.options.retainMs;
      const candidates = await this.ledger.findPrunableJobs({ endedBefore, limit: this.batch });
      if (candidates.length === 0) break;
      for (const job of candidates) await this.removeOutputs(job);
      const gone = await this.ledger.pruneJobs({ jobIds: candidates.map((job) => job.id), endedBefore });
      deleted += gone.length;
      this.pruned(gone.length);
      if (candidates.length < this.batch) break;
    }
    if (deleted > 0) this.logger.info({ jobs: deleted }, 'pruned ended jobs past the retention period');
    return deleted;
  }

  private async removeOutputs(job: PrunableJob): Promise<void> {
    const locations = Object.values(job.result?.outputs ?? {});
    const { outputDir, objectStore } = this.stores;
    if (objectStore && locations.some((location) => location.startsWith('s3://'))) {
      await objectStore.removeAttempt({ tenant: job.tenant, jobId: job.id, attempt: job.attempt });
    }
    if (outputDir !== undefined) {
      const root = resolve(outputDir);
      const folder = resolve(root, job.tenant, job.id);
      // Only a job's own folder, two levels under the root: a name never reaches elsewhere.
      if (relative(root, folder) === join(job.tenant, job.id) && !job.tenant.includes(sep)) await rm(folder, { recursive: true, force: true });
    }
  }
}
