import { createHash } from 'node:crypto';
import { LedgerError } from '../ledger/errors.js';
import type { Ledger, LedgerConfig } from '../ledger/ledger.js';
import {
  ControlErrorCode,
  controlRequest,
  type ControlAnswer,
  type ControlFailure,
  type CompleteUploadReply,
  type RenewUploadReply,
  type ControlRequest,
  type FenceReply,
  type HeartbeatReply,
  type InputsReply,
  type LeaseReply,
  type LogsReply,
  type ProgressReply,
  type ReleaseReply,
  type SettleReply,
} from '../control/protocol.js';
import type { Job } from '../ledger/ledger.js';
import type { Fleet, WorkerReport } from './fleet.js';
import type { LeaseLoss } from '../ledger/ledger.js';
import { ObjectStoreError, type S3OutputStore } from './object-store.js';
import { maxPartSize } from './upload-parts.js';
import { outputNameProblem } from './store-names.js';

/** How long an upload URL stays valid past the lease deadline it was given under, by default. */
export const defaultUploadGraceMs = 10_000;

/** The object store the orchestrator hands upload URLs for, and how long they outlive their lease. */
export interface UploadSigning {
  store: S3OutputStore;
  /** Past the lease's deadline (default 10 s). */
  graceMs?: number;
  now?: () => number;
}

/** Told about each accepted grant and settle, e.g. to keep metrics, and each worker heard from. */
export interface ControlObserver {
  granted(job: Job): void;
  settled(job: Job, attempt: number, transition: string): void;
  /** A heartbeat's report was recorded in the fleet; `offerChanged`: a worker new to it, or whose job types or slots changed. */
  heard?(report: WorkerReport, offerChanged: boolean): void;
}

/**
 * The orchestrator's side of the control plane: turns each request into one ledger
 * call and answers with what the ledger decided. A job is addressed by (id, tenant):
 * a request naming the wrong tenant is answered as if the job did not exist. The lease,
 * the settle and the release hand the tenant to the ledger, which checks it on the row
 * it reads or guards anyway; the other requests read the job first.
 */
export class ControlHandler {
  constructor(
    private readonly ledger: Ledger,
    private readonly fleet: Fleet,
    private readonly config: Pick<LedgerConfig, 'leaseTtlMs'>,
    private readonly observer?: ControlObserver,
    private readonly uploads?: UploadSigning,
  ) {}

  async handle(raw: unknown): Promise<ControlAnswer> {
    const parsed = controlRequest.safeParse(raw);
    if (!parsed.success) {
      return { op: 'error', code: ControlErrorCode.invalidRequest, message: parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ') };
    }
    try {
      return await this.dispatch(parsed.data);
    } catch (error) {
      if (error instanceof LedgerError && error.code === 'invalid_input') {
        return { op: 'error', code: ControlErrorCode.invalidRequest, message: error.message };
      }
      if (error instanceof ObjectStoreError) return { op: 'error', code: ControlErrorCode.storeUnavailable, message: error.message };
      const message = error instanceof Error ? error.message : String(error);
      return { op: 'error', code: ControlErrorCode.ledgerUnavailable, message };
    }
  }

  private dispatch(request: ControlRequest): Promise<ControlAnswer> {
    switch (request.op) {
      case 'lease':
        return this.lease(request);
      case 'heartbeat':
        return this.heartbeat(request);
      case 'fence':
        return this.fence(request);
      case 'inputs':
        return this.inputs(request);
      case 'complete_upload':
        return this.completeUpload(request);
      case 'renew_upload':
        return this.renewUpload(request);
      case 'progress':
        return this.progress(request);
      case 'logs':
        return this.logs(request);
      case 'settle':
        return this.settle(request);
      case 'release':
        return this.release(request);
    }
  }

  private async ownedBy(jobId: string, tenant: string): Promise<boolean> {
    return (await this.ledger.getJob(jobId, tenant)) !== undefined;
  }

  private async lease(request: Extract<ControlRequest, { op: 'lease' }>): Promise<LeaseReply> {
    const { jobId, attempt, tenant } = request;
    // The ledger checks the tenant inside the grant: another tenant's job is unknown_job there.
    const result = await this.ledger.grantLease({ jobId, tenant, attempt, worker: request.worker, holderProof: proofOf(request.secret) });
    if (!result.granted) return { op: 'lease', jobId, attempt, granted: false, reason: result.reason };
    this.observer?.granted(result.job);
    return {
      op: 'lease',
      jobId,
      attempt,
      granted: true,
      token: result.token,
      ttlMs: this.config.leaseTtlMs,
      input: result.job.input,
      requires: result.job.requires,
      ...(result.job.timeoutSeconds === null ? {} : { timeoutSeconds: result.job.timeoutSeconds }),
      ...(result.job.limits === null ? {} : { limits: result.job.limits }),
      ...(this.uploads ? { store: 'presigned' as const } : {}),
    };
  }

  private async heartbeat(request: Extract<ControlRequest, { op: 'heartbeat' }>): Promise<HeartbeatReply | ControlFailure> {
    const report = {
      worker: request.worker,
      jobTypes: request.jobTypes,
      capabilities: request.capabilities,
      heldBack: request.heldBack ?? [],
      slots: request.slots,
      running: request.leases.length,
    };
    // One transaction: the fleet row (refused when another process holds the name, on any
    // orchestrator sharing the ledger) and the leases it renews.
    const result = await this.ledger.heartbeat({
      worker: request.worker,
      report,
      proof: proofOf(request.secret),
      windowMs: this.fleet.windowMs,
      leases: request.leases.map(({ jobId, attempt, token }) => ({ jobId, attempt, token })),
    });
    if (!result.recorded) {
      return {
        op: 'error',
        code: ControlErrorCode.workerConflict,
        message: `worker ${request.worker} is a live member of the fleet, and this heartbeat is not from its process`,
      };
    }
    const offerChanged = this.fleet.record(report, result.heardAt);
    this.observer?.heard?.(report, offerChanged);
    return {
      op: 'heartbeat',
      ttlMs: this.config.leaseTtlMs,
      renewed: result.renewed.map(({ jobId, attempt }) => ({ jobId, attempt })),
      lost: result.lost,
    };
  }

  private async fence(request: Extract<ControlRequest, { op: 'fence' }>): Promise<FenceReply> {
    const { jobId, attempt } = request;
    if (!(await this.ownedBy(jobId, request.tenant))) return { op: 'fence', jobId, attempt, live: false, reason: 'unknown_job' };
    const result = await this.ledger.checkLease(request);
    if (!result.live) return { op: 'fence', jobId, attempt, live: false, reason: result.reason };
    const live = { op: 'fence', jobId, attempt, live: true, ttlMs: this.config.leaseTtlMs } as const;
    if (!this.uploads || !request.outputs) return live;
    // The fence is the upload permission: a URL per output, for this attempt's keys only,
    // that stops working shortly after this lease would have expired.
    for (const { name } of request.outputs) {
      const problem = outputNameProblem(name);
      if (problem) return { ...live, invalidOutput: `output ${JSON.stringify(name)} ${problem}` };
    }
    const { store, graceMs = defaultUploadGraceMs, now = Date.now } = this.uploads;
    const validUntil = result.deadline + graceMs;
    // Recorded before any URL leaves: whatever this attempt uploads, the store cleaner will know where to look.
    await this.ledger.recordUploadGrant({ jobId, attempt, validUntil });
    const uploads = await store.presignUploads(request, request.outputs, validUntil - now());
    return { ...live, uploads };
  }

  /**
   * Presigned GETs for a live lease's `s3://` inputs, each under the job's own tenant's keys
   * (its outputs, its uploads): the worker holds no storage credential, and a job reads
   * nothing of another tenant's through it.
   */
  private async inputs(request: Extract<ControlRequest, { op: 'inputs' }>): Promise<InputsReply> {
    const { jobId, attempt, tenant } = request;
    if (!(await this.ownedBy(jobId, tenant))) return { op: 'inputs', jobId, attempt, live: false, reason: 'unknown_job' };
    const result = await this.ledger.checkLease(request);
    if (!result.live) return { op: 'inputs', jobId, attempt, live: false, reason: result.reason };
    const live = { op: 'inputs', jobId, attempt, live: true } as const;
    if (!this.uploads) return { ...live, refused: `input ${request.locations[0]} is an s3:// URL, and this orchestrator has no object store` };
    const { store, graceMs = defaultUploadGraceMs, now = Date.now } = this.uploads;
    const keys: string[] = [];
    for (const location of request.locations) {
      const key = store.tenantKeyOfLocation(location, tenant);
      if (key === undefined) return { ...live, refused: `input ${location} is not under this job's tenant's keys in ${store.describe()}/${tenant}/` };
      keys.push(key);
    }
    const expiresInMs = result.deadline + graceMs - now();
    const urls = await Promise.all(keys.map((key) => store.presignDownload(key, expiresInMs)));
    return { ...live, downloads: request.locations.map((location, i) => ({ location, url: urls[i]! })) };
  }

  /**
   * The end of a multipart upload the fence allowed: completed only while the lease is still
   * the asker's (the same check as the fence), so a worker that lost its lease during the
   * upload never makes the object visible. Refused, the upload is aborted: its parts are dropped.
   */
  private async completeUpload(request: Extract<ControlRequest, { op: 'complete_upload' }>): Promise<CompleteUploadReply | ControlFailure> {
    const { jobId, attempt } = request;
    const checked = await this.liveUpload(request);
    if ('code' in checked) return checked;
    if (!checked.live) return { op: 'complete_upload', jobId, attempt, live: false, reason: checked.reason };
    try {
      await checked.store.completeUpload(request, request.name, request.uploadId, request.parts);
    } catch (error) {
      if (!(error instanceof ObjectStoreError)) throw error;
      return { op: 'complete_upload', jobId, attempt, live: true, storeError: error.message };
    }
    return { op: 'complete_upload', jobId, attempt, live: true };
  }

  /** Fresh URLs for the parts of an upload still to go, valid as the fence's would be now: only while the lease is live. */
  private async renewUpload(request: Extract<ControlRequest, { op: 'renew_upload' }>): Promise<RenewUploadReply | ControlFailure> {
    const { jobId, attempt } = request;
    const tooLong = request.parts.find(({ start, end }) => end < start || end - start + 1 > maxPartSize);
    if (tooLong) return { op: 'error', code: ControlErrorCode.invalidRequest, message: `part ${tooLong.partNumber} is not 1 byte to 5 GiB long` };
    const checked = await this.liveUpload(request);
    if ('code' in checked) return checked;
    if (!checked.live) return { op: 'renew_upload', jobId, attempt, live: false, reason: checked.reason };
    const validForMs = checked.deadline + checked.graceMs - checked.now;
    const parts = await checked.store.renewParts(request, request.name, request.uploadId, request.parts, validForMs);
    return { op: 'renew_upload', jobId, attempt, live: true, parts, validForMs };
  }

  /**
   * The check before a multipart upload goes on (renew) or ends (complete): the fence's.
   * A lease no longer live aborts the upload; the refusal stands whether or not the store
   * could be told (an upload left behind is never visible, and the sweeper aborts leftovers).
   * A request naming another tenant's job is refused as unknown and aborts nothing.
   */
  private async liveUpload(
    request: Extract<ControlRequest, { op: 'complete_upload' | 'renew_upload' }>,
  ): Promise<ControlFailure | { live: false; reason: LeaseLoss } | { live: true; store: S3OutputStore; deadline: number; graceMs: number; now: number }> {
    if (!this.uploads) return { op: 'error', code: ControlErrorCode.invalidRequest, message: 'this orchestrator has no object store: there is no upload' };
    const problem = outputNameProblem(request.name);
    if (problem) return { op: 'error', code: ControlErrorCode.invalidRequest, message: `output ${JSON.stringify(request.name)} ${problem}` };
    if (!(await this.ownedBy(request.jobId, request.tenant))) return { live: false, reason: 'unknown_job' };
    const { store, graceMs = defaultUploadGraceMs, now = Date.now } = this.uploads;
    const result = await this.ledger.checkLease(request);
    if (!result.live) {
      await store.abortOutputUpload(request, request.name, request.uploadId).catch(() => undefined);
      return { live: false, reason: result.reason };
    }
    return { live: true, store, deadline: result.deadline, graceMs, now: now() };
  }

  private async progress(request: Extract<ControlRequest, { op: 'progress' }>): Promise<ProgressReply> {
    const { jobId, attempt } = request;
    if (!(await this.ownedBy(jobId, request.tenant))) return { op: 'progress', jobId, attempt, accepted: false, reason: 'unknown_job' };
    const result = await this.ledger.recordProgress(request);
    return result.accepted ? { op: 'progress', jobId, attempt, accepted: true } : { op: 'progress', jobId, attempt, accepted: false, reason: result.reason };
  }

  private async logs(request: Extract<ControlRequest, { op: 'logs' }>): Promise<LogsReply> {
    const { jobId, attempt } = request;
    if (!(await this.ownedBy(jobId, request.tenant))) return { op: 'logs', jobId, attempt, accepted: false, reason: 'unknown_job' };
    const result = await this.ledger.appendLogs(request);
    return result.accepted ? { op: 'logs', jobId, attempt, accepted: true } : { op: 'logs', jobId, attempt, accepted: false, reason: result.reason };
  }

  private async settle(request: Extract<ControlRequest, { op: 'settle' }>): Promise<SettleReply> {
    const { jobId, attempt } = request;
    // The request names its tenant, which the ledger checks on the row it settles.
    const result = await this.ledger.settle(request);
    if (result.accepted) this.observer?.settled(result.job, attempt, result.transition);
    return result.accepted
      ? { op: 'settle', jobId, attempt, accepted: true, state: result.job.state, transition: result.transition }
      : { op: 'settle', jobId, attempt, accepted: false, reason: result.reason };
  }

  private async release(request: Extract<ControlRequest, { op: 'release' }>): Promise<ReleaseReply> {
    const { jobId, attempt } = request;
    // As for a settle, the ledger checks the tenant.
    const result = await this.ledger.release(request);
    if (result.accepted) this.observer?.settled(result.job, attempt, result.transition);
    return result.accepted
      ? { op: 'release', jobId, attempt, accepted: true, state: result.job.state, transition: result.transition }
      : { op: 'release', jobId, attempt, accepted: false, reason: result.reason };
  }
}

/** What the ledger and the fleet keep of a worker's secret: its digest, so that neither a ledger reader nor a log learns the secret. */
function proofOf(secret: string): string {
  return createHash('sha256').update(secret).digest('base64url');
}
