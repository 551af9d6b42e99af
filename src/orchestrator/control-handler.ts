import { createHash } from 'node:crypto';
import { LedgerError } from '../ledger/errors.js';
import type { Ledger, LedgerConfig } from '../ledger/ledger.js';
import {
  ControlErrorCode,
  controlRequest,
  type ControlAnswer,
  type ControlFailure,
  type ControlRequest,
  type FenceReply,
  type HeartbeatReply,
  type LeaseReply,
  type ProgressReply,
  type ReleaseReply,
  type SettleReply,
} from '../control/protocol.js';
import type { Job } from '../ledger/ledger.js';
import type { Fleet, WorkerReport } from './fleet.js';
import type { S3OutputStore } from './object-store.js';
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
  /** A heartbeat's report was recorded in the fleet. */
  heard?(report: WorkerReport): void;
}

/**
 * The orchestrator's side of the control plane: turns each request into one ledger
 * call and answers with what the ledger decided. A job is addressed by (id, tenant):
 * a request naming the wrong tenant is answered as if the job did not exist.
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
      case 'progress':
        return this.progress(request);
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
    const { jobId, attempt } = request;
    if (!(await this.ownedBy(jobId, request.tenant))) return { op: 'lease', jobId, attempt, granted: false, reason: 'unknown_job' };
    const result = await this.ledger.grantLease({ jobId, attempt, worker: request.worker, holderProof: proofOf(request.secret) });
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
    if (!this.fleet.record(report, proofOf(request.secret))) {
      return {
        op: 'error',
        code: ControlErrorCode.workerConflict,
        message: `worker ${request.worker} is a live member of the fleet, and this heartbeat is not from its process`,
      };
    }
    this.observer?.heard?.(report);
    const result = await this.ledger.renewLeases({
      worker: request.worker,
      leases: request.leases.map(({ jobId, attempt, token }) => ({ jobId, attempt, token })),
    });
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
    const uploads = await store.presignUploads(request, request.outputs, result.deadline + graceMs - now());
    return { ...live, uploads };
  }

  private async progress(request: Extract<ControlRequest, { op: 'progress' }>): Promise<ProgressReply> {
    const { jobId, attempt } = request;
    if (!(await this.ownedBy(jobId, request.tenant))) return { op: 'progress', jobId, attempt, accepted: false, reason: 'unknown_job' };
    const result = await this.ledger.recordProgress(request);
    return result.accepted ? { op: 'progress', jobId, attempt, accepted: true } : { op: 'progress', jobId, attempt, accepted: false, reason: result.reason };
  }

  private async settle(request: Extract<ControlRequest, { op: 'settle' }>): Promise<SettleReply> {
    const { jobId, attempt } = request;
    if (!(await this.ownedBy(jobId, request.tenant))) return { op: 'settle', jobId, attempt, accepted: false, reason: 'unknown_job' };
    const result = await this.ledger.settle(request);
    if (result.accepted) this.observer?.settled(result.job, attempt, result.transition);
    return result.accepted
      ? { op: 'settle', jobId, attempt, accepted: true, state: result.job.state, transition: result.transition }
      : { op: 'settle', jobId, attempt, accepted: false, reason: result.reason };
  }

  private async release(request: Extract<ControlRequest, { op: 'release' }>): Promise<ReleaseReply> {
    const { jobId, attempt } = request;
    if (!(await this.ownedBy(jobId, request.tenant))) return { op: 'release', jobId, attempt, accepted: false, reason: 'unknown_job' };
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
