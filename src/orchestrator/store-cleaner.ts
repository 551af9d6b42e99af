import type { Logger } from 'pino';
import type { Clock } from '../core/clock.js';
import type { Ledger, UploadCleanup } from '../ledger/ledger.js';
import { isTerminal } from '../ledger/states.js';
import { Loop } from './loop.js';
import type { S3OutputStore, UnfinishedUpload } from './object-store.js';

/** How long after a losing attempt's last upload URL stopped working its objects are removed, by default (`--store-cleanup-grace`). */
export const defaultStoreCleanupGraceMs = 3_600_000;

export interface StoreCleanupOptions {
  /** Default one hour. */
  graceMs: number;
  /** Between passes; default a quarter of the grace, between 100 ms and a minute. */
  intervalMs?: number;
  /** Attempts claimed at once (default 50). */
  batch?: number;
  /** Batches per pass at most (default 20), so that one pass stays bounded. */
  batchesPerPass?: number;
  /** How long a claimed batch is this orchestrator's before another may take it (default 5 min). */
  claimMs?: number;
}

/** What one pass removed. */
export interface StoreCleanupReport {
  /** Losing attempts whose prefix was emptied. */
  attempts: number;
  objects: number;
  /** Unfinished multipart uploads aborted, under those prefixes and elsewhere in the store. */
  uploads: number;
}

export interface StoreCleanupCounts {
  objectsRemoved(n: number): void;
  uploadsAborted(n: number): void;
}

/**
 * The store's sweeper: removes what attempts that lost (a crash after some uploads, a job
 * that failed, an attempt superseded by a later one) left in the object store, once the
 * grace has passed since their last upload URL stopped working, so that an upload begun
 * just before then has ended. The delivered attempt's outputs are never touched.
 *
 * It never lists the whole bucket for objects: the ledger knows which attempts were handed
 * URLs (upload grants, recorded by the fence), and a pass takes the decided ones in small
 * claimed batches, empties each one's prefix and marks it removed. Unfinished multipart
 * uploads (rarely more than a few) are listed under the store's prefix, and those older
 * than the grace whose attempt can no longer deliver are aborted.
 *
 * Safe with several orchestrators: a claim keeps a batch to one cleaner; deleting what is
 * gone, or aborting an upload another cleaner aborted, is no error.
 */
export class StoreCleaner {
  private readonly loop: Loop;
  private readonly graceMs: number;
  private readonly batch: number;
  private readonly batchesPerPass: number;
  private readonly claimMs: number;

  constructor(
    private readonly ledger: Ledger,
    private readonly store: S3OutputStore,
    private readonly logger: Logger,
    private readonly clock: Clock,
    options: StoreCleanupOptions,
    private readonly counts: StoreCleanupCounts,
  ) {
    this.graceMs = options.graceMs;
    this.batch = options.batch ?? 50;
    this.batchesPerPass = options.batchesPerPass ?? 20;
    this.claimMs = options.claimMs ?? 300_000;
    const intervalMs = options.intervalMs ?? Math.min(60_000, Math.max(100, Math.round(options.graceMs / 4)));
    this.loop = new Loop('store cleaner', logger, async () => {
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

  async runOnce(): Promise<StoreCleanupReport> {
    const report: StoreCleanupReport = { attempts: 0, objects: 0, uploads: 0 };
    for (let n = 0; n < this.batchesPerPass; n++) {
      const { remove } = await this.ledger.claimUploadCleanups({ graceMs: this.graceMs, limit: this.batch, claimMs: this.claimMs });
      const removed: UploadCleanup[] = [];
      for (const attempt of remove) {
        try {
          const { objects, uploads } = await this.store.removeAttempt(attempt);
          this.count(report, objects, uploads);
          removed.push(attempt);
        } catch (error) {
          // Left claimed: taken again once the claim runs out.
          this.logger.warn({ err: error, jobId: attempt.jobId, attempt: attempt.attempt }, 'could not remove the objects of a losing attempt; retried later');
        }
      }
      if (removed.length > 0) await this.ledger.markUploadsRemoved(removed);
      report.attempts += removed.length;
      if (remove.length < this.batch) break;
    }
    await this.abortStaleUploads(report);
    if (report.objects + report.uploads > 0) this.logger.info(report, 'store cleanup');
    return report;
  }

  /** Unfinished multipart uploads begun before the grace whose attempt can no longer deliver (ended, or superseded). */
  private async abortStaleUploads(report: StoreCleanupReport): Promise<void> {
    const before = this.clock.now() - this.graceMs;
    for await (const upload of this.store.unfinishedUploads()) {
      if (upload.initiatedAt > before || !(await this.decided(upload))) continue;
      if (await this.store.abortUpload(upload)) this.count(report, 0, 1);
    }
  }

  private async decided({ attempt }: UnfinishedUpload): Promise<boolean> {
    if (!attempt) return false;
    const job = await this.ledger.getJob(attempt.jobId, attempt.tenant);
    return job !== undefined && (isTerminal(job.state) || attempt.attempt < job.attempt);
  }

  private count(report: StoreCleanupReport, objects: number, uploads: number): void {
    report.objects += objects;
    report.uploads += uploads;
    if (objects > 0) this.counts.objectsRemoved(objects);
    if (uploads > 0) this.counts.uploadsAborted(uploads);
  }
}
