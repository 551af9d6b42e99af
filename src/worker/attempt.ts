import type { Logger } from 'pino';
import { isBrokerError } from '../broker/broker.js';
import type { Clock } from '../core/clock.js';
import { isJobError, type SerializedError } from '../core/errors.js';
import type { PresignedUpload } from '../control/protocol.js';
import type { JobResult, SettleOutcome } from '../ledger/ledger.js';
import type { ControlClient } from './control-client.js';
import { describeError } from './describe-error.js';
import { fetchJobInputs, InputLeaseLost, type InputFetching } from './inputs/job-inputs.js';
import type { HeldLease, LeaseBook } from './lease-book.js';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { PresignedOutputStore, StorageError, UploadFencedOutError, type OutputStore } from './output-store.js';
import { ProgressThrottle } from './runner/progress-throttle.js';
import { reportedUploadBytes, uploadProgressMessage } from './upload-progress.js';
import type { JobType } from './runner/job-type.js';
import type { RunHooks } from './runner/job-process.js';
import type { RunTask } from './runner/protocol.js';
import { AttemptLog } from './attempt-log.js';
import { failed, type RunOutcome } from './runner/run-outcome.js';
import { createScratch, removeScratch } from './runner/scratch.js';
import type { FencedOutReason, LeaseLossReason, WorkerEvents } from './worker-events.js';
import { plainLocations, type StoredFile } from '../wire/outputs.js';

/** Runs job code; the process pool in production, anything with the same contract in tests. */
export interface JobRunner {
  run(task: RunTask, hooks: RunHooks): Promise<RunOutcome>;
  close(): Promise<void>;
}

/** What the attempts of one worker share: its services, and the two things only the worker can do. */
export interface AttemptContext {
  control: ControlClient;
  leases: LeaseBook;
  runner: JobRunner;
  outputStore: OutputStore;
  scratchRoot: string;
  /** The scratch reserve of a job whose type declares none (the job may add no more to its scratch folder). */
  defaultOutputReserveBytes: number;
  /** How inputs named by URL are fetched before the run. */
  inputFetching: InputFetching;
  events: WorkerEvents;
  logger: Logger;
  clock: Clock;
  /** Progress goes to the orchestrator at most this often per job. */
  progressIntervalMs: number;
  /** A line the job printed waits at most this long before it is sent to the orchestrator with the lines after it. */
  logFlushMs: number;
  /** How long a control request waits; a settle tried again waits at most this long (and 500 ms) in between. */
  controlTimeoutMs: number;
  /** The job's code raised a Fatal error: the worker stops, handing this attempt back with the others. */
  fatal(attempt: Attempt, error: SerializedError): Promise<void>;
  /** The attempt is over: the worker no longer counts it as running. Called before its scratch is removed. */
  forget(attempt: Attempt): void;
}

const cancelledByTenant: SerializedError = { class: 'permanent', code: 'cancelled', message: 'cancelled by its tenant' };

/**
 * One attempt's life on this worker, from its grant to its end: the job's code runs while
 * the worker's heartbeat keeps the lease; then, if the lease held, its outputs are stored
 * only after the fence says the lease is still this attempt's, and its outcome is settled.
 * A lease lost on the way aborts the job, and whatever it returns is dropped (a cancelled
 * job is settled as cancelled); a lease handed back (the worker stops) is dropped silently.
 */
export class Attempt {
  /** Why the lease was lost, once it was. */
  private lost: LeaseLossReason | undefined;
  /** The release of this lease, once asked for (see handBack): nothing more is said about the attempt then. */
  private handingBack: Promise<void> | undefined;
  private codeReturned = false;
  /** The worker forgot the attempt: a loss heard now is of no consequence. */
  private over = false;
  /** The ledger accepted this attempt's settle: a loss heard after it is the settle's own doing. */
  private settled = false;
  private lastProgressSentAt = 0;
  /** The fraction the job's code last reported; the upload of its outputs reports with it unchanged. */
  private lastFraction: number | undefined;

  constructor(
    private readonly context: AttemptContext,
    readonly lease: HeldLease,
    private readonly type: JobType,
  ) {}

  /** Why the lease was lost, if it was (a refused settle included). */
  get lostReason(): LeaseLossReason | undefined {
    return this.lost;
  }

  /** The job's code returned: its outcome is being fenced, stored or settled, so it is not handed back. */
  get returned(): boolean {
    return this.codeReturned;
  }

  /** Runs the job and deals with its outcome; resolves once the attempt is over and its scratch removed. Never rejects. */
  async run(input: unknown, { timeoutSeconds, limits }: Pick<RunTask, 'timeoutSeconds' | 'limits'> = {}): Promise<void> {
    const { lease, context } = this;
    let scratchDir: string | undefined;
    try {
      scratchDir = await createScratch(context.scratchRoot, lease.jobId, lease.attempt);
      const fetched = await this.fetchInputs(input, scratchDir);
      const log = this.openLog();
      const outcome = fetched.ok
        ? await context.runner.run(
            {
              jobId: lease.jobId,
              attempt: lease.attempt,
              tenant: lease.tenant,
              type: this.type.name,
              input: fetched.input,
              scratchDir,
              scratchReserveBytes: this.type.outputReserveBytes ?? context.defaultOutputReserveBytes,
              // The folder was made just now; only fetched inputs can be in it.
              ...(this.type.inputFiles?.length ? {} : { scratchStartBytes: 0 }),
              ...(timeoutSeconds === undefined ? {} : { timeoutSeconds }),
              ...(limits === undefined ? {} : { limits }),
            },
            {
              onProgress: (fraction, message) => this.onProgress(fraction, message),
              onLog: (stream, message, fields) => log.add(stream, message, fields),
              signal: lease.abort.signal,
            },
          )
        : fetched.outcome;
      this.codeReturned = true;
      // A line printed just before the job returned may be read a turn after its result.
      await new Promise<void>((resolve) => setImmediate(resolve));
      // Sent before the outcome is settled, while the lease is live and the ledger takes them.
      await log.close();
      const logTail = log.logTail();
      if (!outcome.ok && logTail !== '' && outcome.error.logTail === undefined) outcome.error.logTail = logTail;
      await this.finish(outcome, scratchDir);
    } catch (error) {
      context.logger.error({ jobId: lease.jobId, err: describeError(error) }, 'job handling failed');
    } finally {
      this.over = true;
      context.forget(this);
      context.leases.remove(lease.jobId);
      if (scratchDir) await removeScratch(scratchDir).catch(() => undefined);
      context.events.emit({ type: 'job_done', jobId: lease.jobId, attempt: lease.attempt });
    }
  }

  /** The attempt's log, sent to the orchestrator in batches while the job runs. */
  private openLog(): AttemptLog {
    const { lease, context } = this;
    return new AttemptLog({
      send: (batch) => context.control.logs({ jobId: lease.jobId, attempt: lease.attempt, token: lease.token, tenant: lease.tenant, ...batch }),
      now: () => context.clock.now(),
      flushMs: context.logFlushMs,
      refused: (reason) => this.lose(reason),
      failed: (error) => context.logger.debug({ jobId: lease.jobId, err: describeError(error) }, 'log lines not sent; counted as dropped'),
    });
  }

  /**
   * Fetches the inputs the job type names by URL into the scratch folder, before the job
   * runs (in the worker, so the job's code gets only its scratch folder, input and
   * progress). A failed fetch is the attempt's outcome, as if the job had thrown it; a
   * lease found lost on the way is lost here too.
   */
  private async fetchInputs(input: unknown, scratchDir: string): Promise<{ ok: true; input: unknown } | { ok: false; outcome: RunOutcome }> {
    const { lease, context } = this;
    try {
      return { ok: true, input: await fetchJobInputs(this.type, input, { lease, scratchDir, control: context.control, fetching: context.inputFetching }) };
    } catch (error) {
      if (error instanceof InputLeaseLost) this.lose(error.reason);
      const serialized: SerializedError = isJobError(error) ? error.toJSON() : { class: 'transient', code: 'input_unreachable', message: describeError(error) };
      // A fetch stopped because the lease was lost (or handed back) is not the input's failure.
      if (!lease.abort.signal.aborted) context.events.emit({ type: 'input_failed', jobId: lease.jobId, attempt: lease.attempt, code: serialized.code });
      return { ok: false, outcome: failed(serialized) };
    }
  }

  /** The lease is lost: the job is aborted, and what it returns will not be stored. Only the first loss counts. */
  lose(reason: LeaseLossReason): void {
    // A heartbeat answered after this attempt's own settle was accepted finds the job ended.
    if (this.over || this.settled || this.lost || this.handingBack) return;
    const { lease, context } = this;
    this.lost = reason;
    context.events.emit({ type: 'lease_lost', jobId: lease.jobId, attempt: lease.attempt, reason });
    // A cancel is the tenant's wish, not a fault: said at info. Any other loss is worth a warning.
    if (reason === 'cancelled') context.logger.info({ jobId: lease.jobId, attempt: lease.attempt }, 'job cancelled; stopping it');
    // Ended while its outcome was on the way: most likely by its own settle, answered later.
    else if (reason === 'ended' && this.codeReturned)
      context.logger.info({ jobId: lease.jobId, attempt: lease.attempt }, 'job ended while its outcome was settled');
    else context.logger.warn({ jobId: lease.jobId, attempt: lease.attempt, reason }, 'lease lost; stopping the job');
    lease.abort.abort(new Error(`lease lost: ${reason}`));
  }

  /**
   * Gives the lease back to the ledger before its end (release): the attempt ends with
   * `error` recorded and the next one is due at once, instead of a lease TTL later. The
   * job's process is aborted; whatever it still returns is dropped. If the orchestrator
   * cannot be reached the lease simply runs out, as after a crash. Once per attempt.
   */
  handBack(error: SerializedError): Promise<void> {
    this.handingBack ??= this.release(error);
    return this.handingBack;
  }

  private async release(error: SerializedError): Promise<void> {
    const { lease, context } = this;
    lease.abort.abort(new Error(`the job is handed back: ${error.message}`));
    const handedBack = { type: 'handed_back', jobId: lease.jobId, attempt: lease.attempt, code: error.code } as const;
    try {
      const reply = await context.control.release({ jobId: lease.jobId, attempt: lease.attempt, token: lease.token, tenant: lease.tenant, error });
      context.events.emit({ ...handedBack, outcome: reply.accepted ? reply.transition : `refused ${reply.reason}` });
    } catch (err) {
      context.logger.warn({ jobId: lease.jobId, err: describeError(err) }, 'lease not handed back; it runs out instead');
      context.events.emit({ ...handedBack, outcome: 'unconfirmed' });
    }
  }

  private async finish(outcome: RunOutcome, scratchDir: string): Promise<void> {
    const { lease, context } = this;
    if (this.handingBack) return;
    if (this.lost === 'cancelled') {
      await this.settle({ kind: 'failed', error: cancelledByTenant });
      return;
    }
    if (this.lost) {
      context.events.emit({ type: 'abandoned', jobId: lease.jobId, attempt: lease.attempt, reason: this.lost });
      return;
    }
    if (!outcome.ok) {
      if (outcome.error.class === 'fatal') await context.fatal(this, outcome.error);
      else await this.settle({ kind: 'failed', error: outcome.error });
      return;
    }
    const files = outcome.result.outputs ?? [];
    const storing = files.length > 0;
    // The fence guards outputs becoming visible. A job that returned none has nothing to
    // fence or store: the settle is itself a CAS keyed to this attempt's live lease, so a
    // stale attempt still announces nothing. That saves a control round trip (and an empty
    // output folder) per job.
    const fenced = storing ? await this.fence(scratchDir, files) : { store: context.outputStore };
    if ('reason' in fenced) {
      context.events.emit({ type: 'fenced_out', jobId: lease.jobId, attempt: lease.attempt, reason: fenced.reason });
      return;
    }
    if ('error' in fenced) {
      await this.settle({ kind: 'failed', error: fenced.error });
      return;
    }
    let result: JobResult;
    try {
      // `outputs` keeps the contract's plain form (a path or s3:// URL); `outputFiles` adds size and sha256.
      const outputFiles: Record<string, StoredFile> = storing ? await fenced.store.put(lease, scratchDir, files) : {};
      const outputs = plainLocations(outputFiles);
      if (storing) context.events.emit({ type: 'output_stored', jobId: lease.jobId, attempt: lease.attempt, outputs, files: outputFiles });
      result = { ...(outcome.result.data === undefined ? {} : { data: outcome.result.data }), outputs, outputFiles };
    } catch (error) {
      if (error instanceof UploadFencedOutError) {
        // The orchestrator refused to complete an upload (and aborted it): as after a refused fence.
        this.lost = error.reason;
        context.events.emit({ type: 'fenced_out', jobId: lease.jobId, attempt: lease.attempt, reason: error.reason });
        return;
      }
      if (this.lost) {
        // The lease was lost during the upload (which it aborted): nothing is settled.
        context.events.emit({ type: 'abandoned', jobId: lease.jobId, attempt: lease.attempt, reason: this.lost });
        return;
      }
      const code = error instanceof StorageError ? error.code : 'output_store_failed';
      await this.settle({ kind: 'failed', error: { class: 'transient', code, message: describeError(error) } });
      return;
    }
    await this.settle({ kind: 'finished', result });
  }

  /**
   * The fence before any output becomes visible: ask the ledger. A live answer is the
   * permission to store, and says where: with presigned upload URLs when the orchestrator
   * has an object store, else into this worker's own folder store. If it cannot be asked,
   * trust only the local deadline (never later than the ledger's), and only for the folder
   * store: without a live answer there is no URL to upload to. Says why the outputs may
   * not be stored, the error to settle instead, or where to store them.
   */
  private async fence(
    scratchDir: string,
    files: readonly string[],
  ): Promise<{ reason: FencedOutReason } | { error: SerializedError } | { store: OutputStore }> {
    const { lease, context } = this;
    // A loss heard before (or while) the fence is asked names the reason; else it is the local deadline.
    const notLive = (): { reason: FencedOutReason } => ({ reason: this.lost ?? 'lease not live' });
    if (!context.leases.isLocallyLive(lease)) return notLive();
    // Only a grant taken up is safe to store under: one never renewed may still be
    // abandoned after a live fence, and its attempt run again elsewhere (lease-book.ts).
    if (!(await context.leases.whenTakenUp(lease))) return notLive();
    let outputs: Array<{ name: string; bytes: number }>;
    try {
      outputs = await Promise.all(files.map(async (name) => ({ name, bytes: (await stat(join(scratchDir, name))).size })));
    } catch (error) {
      return { error: { class: 'transient', code: 'output_store_failed', message: describeError(error) } };
    }
    try {
      const reply = await context.control.fence({ jobId: lease.jobId, attempt: lease.attempt, token: lease.token, tenant: lease.tenant, outputs });
      if (!reply.live) {
        this.lost = reply.reason;
        return { reason: reply.reason };
      }
      if (reply.invalidOutput) return { error: { class: 'permanent', code: 'invalid_output', message: reply.invalidOutput } };
      if (reply.uploads) return { store: this.presignedStore(reply.uploads) };
      if (lease.store === 'presigned') return { error: storageUnreachable('the fence answer carried no upload URL') };
      return { store: context.outputStore };
    } catch (error) {
      context.logger.warn({ jobId: lease.jobId, err: describeError(error) }, 'fence check failed; trusting the local lease deadline');
      if (!context.leases.isLocallyLive(lease)) return notLive();
      if (lease.store === 'presigned')
        return { error: storageUnreachable(`the fence could not be asked (${describeError(error)}), and only its answer gives upload URLs`) };
      return { store: context.outputStore };
    }
  }

  /**
   * The store a live fence answer's uploads make: a multipart upload's part URLs are renewed
   * and the upload completed through the control plane (only while this lease is live), and
   * the progress of an upload worth watching goes out as the job's progress, throttled like
   * the job's own reports, the fraction unchanged.
   */
  private presignedStore(uploads: PresignedUpload[]): OutputStore {
    const { lease, context } = this;
    const fraction = this.lastFraction ?? 1;
    const put: OutputStore['put'] = async (key, scratchDir, files) => {
      const throttle = new ProgressThrottle(
        context.progressIntervalMs,
        ({ message }) => this.sendProgress(fraction, message),
        () => context.clock.now(),
      );
      const ref = { jobId: lease.jobId, attempt: lease.attempt, token: lease.token, tenant: lease.tenant };
      const store = new PresignedOutputStore(uploads, lease.abort.signal, {
        multipart: {
          complete: (name, uploadId, parts) => context.control.completeUpload({ ...ref, name, uploadId, parts }),
          renew: (name, uploadId, parts) => context.control.renewUpload({ ...ref, name, uploadId, parts }),
        },
        onProgress: (sent, total) => {
          if (total >= reportedUploadBytes) throttle.report({ fraction, message: uploadProgressMessage(sent, total) });
        },
        now: () => context.clock.now(),
      });
      try {
        return await store.put(key, scratchDir, files);
      } finally {
        throttle.close();
      }
    };
    return { put };
  }

  private async settle(outcome: SettleOutcome): Promise<void> {
    const { lease, context } = this;
    let retried = false;
    for (;;) {
      try {
        const reply = await context.control.settle({ jobId: lease.jobId, attempt: lease.attempt, token: lease.token, tenant: lease.tenant, outcome });
        if (reply.accepted) {
          this.settled = true;
          context.events.emit({ type: 'settled', jobId: lease.jobId, attempt: lease.attempt, state: reply.state, transition: reply.transition });
        } else if (retried && reply.reason === 'ended') {
          // An earlier try of this same settle was applied; its reply was lost on the way.
          this.settled = true;
          context.events.emit({ type: 'settled', jobId: lease.jobId, attempt: lease.attempt, state: 'ended', transition: 'unknown' });
        } else {
          this.lost ??= reply.reason;
          context.events.emit({ type: 'settle_refused', jobId: lease.jobId, attempt: lease.attempt, reason: reply.reason });
        }
        return;
      } catch (error) {
        if (!context.leases.isLocallyLive(lease) || !isRetryable(error)) {
          context.logger.warn({ jobId: lease.jobId, err: describeError(error) }, 'settle not confirmed; the sweeper will retry the job');
          context.events.emit({ type: 'settle_refused', jobId: lease.jobId, attempt: lease.attempt, reason: 'unconfirmed' });
          return;
        }
        retried = true;
        await sleep(Math.min(500, context.controlTimeoutMs));
      }
    }
  }

  private onProgress(fraction: number, message?: string): void {
    const { context } = this;
    this.lastFraction = fraction;
    const now = context.clock.now();
    if (fraction < 1 && now - this.lastProgressSentAt < context.progressIntervalMs) return;
    this.lastProgressSentAt = now;
    this.sendProgress(fraction, message);
  }

  private sendProgress(fraction: number, message?: string): void {
    const { lease, context } = this;
    context.events.emit({ type: 'progress', jobId: lease.jobId, attempt: lease.attempt, fraction });
    context.control
      .progress({
        jobId: lease.jobId,
        attempt: lease.attempt,
        token: lease.token,
        tenant: lease.tenant,
        fraction,
        ...(message === undefined ? {} : { message }),
      })
      .then((reply) => {
        if (!reply.accepted) this.lose(reply.reason);
      })
      .catch(() => undefined); // Progress is advisory; the heartbeat keeps the lease.
  }
}

function storageUnreachable(message: string): SerializedError {
  return { class: 'transient', code: 'storage_unreachable', message };
}

function isRetryable(error: unknown): boolean {
  return isBrokerError(error, 'timeout') || isBrokerError(error, 'disconnected');
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
