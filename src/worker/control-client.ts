import { randomBytes } from 'node:crypto';
import { BrokerError, type Broker, type HeaderValue } from '../broker/broker.js';
import {
  decode,
  encode,
  fleetKeyHeader,
  maxControlBatch,
  type ControlAnswer,
  type ControlBatchReply,
  type CompleteUploadReply,
  type ControlRequest,
  type FenceReply,
  type HeartbeatReply,
  type InputsReply,
  type LeaseReply,
  type LogsReply,
  type ProgressReply,
  type ReleaseReply,
  type RenewUploadReply,
  type SettleReply,
} from '../control/protocol.js';
import { tenantHeader, type Topology } from '../topology.js';

/** The orchestrator answered, but with an error instead of a decision (bad request, ledger down). */
export class ControlError extends Error {
  override readonly name = 'ControlError';
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** How long a worker waits for the answer to `complete_upload`, at least: the store assembles the object first. */
export const completeUploadTimeoutMs = 120_000;

type Reply<Op extends ControlRequest['op']> = Extract<ControlAnswer, { op: Op }>;

/** What a worker process proves itself with on the control plane (see protocol.ts). */
export interface WorkerCredentials {
  /** Made at random by this process, never shown to anyone but the orchestrator. */
  secret: string;
  /** The fleet key the orchestrator was given, if any (`PLANRUN_FLEET_KEY`). */
  fleetKey?: string | undefined;
}

export function newWorkerSecret(): string {
  return randomBytes(32).toString('base64url');
}

interface Pending {
  request: ControlRequest;
  tenant: string | undefined;
  resolve(answer: ControlAnswer): void;
  reject(error: unknown): void;
  /** Told the answer when it comes after the caller was told `timeout` (leases only). */
  late: ((answer: ControlAnswer) => void) | undefined;
  gaveUp: boolean;
  timer: NodeJS.Timeout | undefined;
}

/**
 * The worker's side of the control plane: typed requests over the broker's
 * request/reply. Broker failures (timeout, disconnected) reject with the BrokerError;
 * orchestrator errors reject with a ControlError; refusals are values in the reply.
 *
 * Requests made in the same turn of the event loop (the leases of a burst of deliveries,
 * the settles of jobs that ended together, a heartbeat) leave as one batch message: one
 * broker round trip for all of them. Each still gets its own answer; a broker failure
 * fails the whole batch, as it would have failed each request alone.
 *
 * A lease the orchestrator grants after the worker stopped waiting (it had taken the
 * request before the cut, and answers after the heal) is not thrown away: for
 * `lateWindowMs` after the timeout the client keeps listening, and hands such a grant to
 * the caller's `onLateGrant`, who may still run the job. Otherwise the grant would sit
 * unused until its lease ran out, and cost the job an attempt.
 */
export class ControlClient {
  private waiting: Pending[] = [];
  private scheduled: NodeJS.Immediate | undefined;

  constructor(
    private readonly broker: Broker,
    private readonly topology: Topology,
    private readonly timeoutMs: number,
    private readonly lateWindowMs = 0,
    private readonly credentials: WorkerCredentials = { secret: newWorkerSecret() },
  ) {}

  lease(
    request: Omit<Extract<ControlRequest, { op: 'lease' }>, 'op' | 'secret'>,
    onLateGrant?: (reply: LeaseReply & { granted: true }) => void,
  ): Promise<LeaseReply> {
    const late = onLateGrant
      ? (answer: ControlAnswer) => {
          if (answer.op === 'lease' && answer.granted && answer.jobId === request.jobId && answer.attempt === request.attempt) onLateGrant(answer);
        }
      : undefined;
    return this.call({ op: 'lease', ...request, secret: this.credentials.secret }, request.tenant, late);
  }

  heartbeat(request: Omit<Extract<ControlRequest, { op: 'heartbeat' }>, 'op' | 'secret'>): Promise<HeartbeatReply> {
    return this.call({ op: 'heartbeat', ...request, secret: this.credentials.secret });
  }

  fence(request: Omit<Extract<ControlRequest, { op: 'fence' }>, 'op'>): Promise<FenceReply> {
    return this.call({ op: 'fence', ...request }, request.tenant);
  }

  inputs(request: Omit<Extract<ControlRequest, { op: 'inputs' }>, 'op'>): Promise<InputsReply> {
    return this.call({ op: 'inputs', ...request }, request.tenant);
  }

  renewUpload(request: Omit<Extract<ControlRequest, { op: 'renew_upload' }>, 'op'>): Promise<RenewUploadReply> {
    return this.call({ op: 'renew_upload', ...request }, request.tenant);
  }

  /**
   * Sent on its own, not batched, and waited for longer than other requests
   * (`completeUploadTimeoutMs`): the store assembles the object before the orchestrator
   * answers, which for a large file takes a while, and no heartbeat should wait behind it.
   */
  completeUpload(request: Omit<Extract<ControlRequest, { op: 'complete_upload' }>, 'op'>): Promise<CompleteUploadReply> {
    return this.call({ op: 'complete_upload', ...request }, request.tenant, undefined, Math.max(this.timeoutMs, completeUploadTimeoutMs));
  }

  progress(request: Omit<Extract<ControlRequest, { op: 'progress' }>, 'op'>): Promise<ProgressReply> {
    return this.call({ op: 'progress', ...request }, request.tenant);
  }

  /** A batch of a job's log lines: it rides in the same batch message as the other requests of its turn. */
  logs(request: Omit<Extract<ControlRequest, { op: 'logs' }>, 'op'>): Promise<LogsReply> {
    return this.call({ op: 'logs', ...request }, request.tenant);
  }

  settle(request: Omit<Extract<ControlRequest, { op: 'settle' }>, 'op'>): Promise<SettleReply> {
    return this.call({ op: 'settle', ...request }, request.tenant);
  }

  release(request: Omit<Extract<ControlRequest, { op: 'release' }>, 'op'>): Promise<ReleaseReply> {
    return this.call({ op: 'release', ...request }, request.tenant);
  }

  /** A request waits for the next batch, or, with a timeout of its own, leaves alone at once. */
  private async call<R extends ControlRequest>(
    request: R,
    tenant?: string,
    late?: (answer: ControlAnswer) => void,
    aloneTimeoutMs?: number,
  ): Promise<Reply<R['op']>> {
    const answer = await new Promise<ControlAnswer>((resolve, reject) => {
      const pending = { request, tenant, resolve, reject, late, gaveUp: false, timer: undefined };
      if (aloneTimeoutMs !== undefined) {
        void this.sendBatch([pending], aloneTimeoutMs);
        return;
      }
      this.waiting.push(pending);
      this.scheduled ??= setImmediate(() => this.send());
    });
    if (answer.op === 'error') throw new ControlError(answer.code, answer.message);
    // A reply must answer this very request: same operation, same job and attempt.
    const answered = answer as { op: string; jobId?: string; attempt?: number };
    const asked = request as { jobId?: string; attempt?: number };
    if (answered.op !== request.op || answered.jobId !== asked.jobId || answered.attempt !== asked.attempt) {
      throw new ControlError('mismatched_reply', `a ${request.op} request was answered by a ${answered.op} reply`);
    }
    return answer as Reply<R['op']>;
  }

  private send(): void {
    this.scheduled = undefined;
    const waiting = this.waiting;
    this.waiting = [];
    for (let start = 0; start < waiting.length; start += maxControlBatch) {
      void this.sendBatch(waiting.slice(start, start + maxControlBatch));
    }
  }

  private headers(tenant: string | undefined): Record<string, HeaderValue> {
    return {
      ...(tenant ? { [tenantHeader]: tenant } : {}),
      ...(this.credentials.fleetKey ? { [fleetKeyHeader]: this.credentials.fleetKey } : {}),
    };
  }

  private async sendBatch(batch: Pending[], timeoutMs = this.timeoutMs): Promise<void> {
    // The tenant header names the tenant when the message concerns one (every request also carries it in its body).
    const tenants = new Set(batch.map((pending) => pending.tenant));
    const tenant = tenants.size === 1 ? batch[0]!.tenant : undefined;
    const single = batch.length === 1;
    const listensLate = this.lateWindowMs > 0 && batch.some((pending) => pending.late);
    if (listensLate) {
      // The broker waits longer for this batch than its callers do: each caller still gives up on time.
      for (const pending of batch) {
        pending.timer = setTimeout(() => {
          pending.gaveUp = true;
          pending.reject(new BrokerError('timeout', `no answer to the ${pending.request.op} request within ${timeoutMs} ms`));
        }, timeoutMs);
      }
    }
    try {
      const { queue, exchange } = this.topology.controlRoute();
      const body = await this.broker.request(queue, encode(single ? batch[0]!.request : { op: 'batch', requests: batch.map((pending) => pending.request) }), {
        exchange,
        timeoutMs,
        ...(listensLate ? { waitMs: timeoutMs + this.lateWindowMs } : {}),
        headers: this.headers(tenant),
      });
      const reply = decode(body) as ControlAnswer | ControlBatchReply;
      if (single || reply.op === 'error') {
        for (const pending of batch) answer(pending, reply as ControlAnswer);
        return;
      }
      const answers = reply.op === 'batch' ? reply.answers : undefined;
      if (!answers || answers.length !== batch.length) {
        throw new ControlError(
          'mismatched_reply',
          `a batch of ${batch.length} requests was answered by a ${reply.op} reply${answers ? ` with ${answers.length} answers` : ''}`,
        );
      }
      batch.forEach((pending, i) => answer(pending, answers[i]!));
    } catch (error) {
      for (const pending of batch) {
        clearTimeout(pending.timer);
        if (!pending.gaveUp) pending.reject(error);
      }
    }
  }
}

/** Gives a request its answer, or, if its caller gave up meanwhile, to whoever listens for late answers. */
function answer(pending: Pending, reply: ControlAnswer): void {
  clearTimeout(pending.timer);
  if (!pending.gaveUp) pending.resolve(reply);
  else pending.late?.(reply);
}
