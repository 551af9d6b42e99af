import type { Broker } from '../broker/broker.js';
import {
  decode,
  encode,
  type ControlAnswer,
  type ControlRequest,
  type FenceReply,
  type HeartbeatReply,
  type LeaseReply,
  type ProgressReply,
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

type Reply<Op extends ControlRequest['op']> = Extract<ControlAnswer, { op: Op }>;

/**
 * The worker's side of the control plane: typed requests over the broker's
 * request/reply. Broker failures (timeout, disconnected) reject with the BrokerError;
 * orchestrator errors reject with a ControlError; refusals are values in the reply.
 */
export class ControlClient {
  constructor(
    private readonly broker: Broker,
    private readonly topology: Topology,
    private readonly timeoutMs: number,
  ) {}

  lease(request: Omit<Extract<ControlRequest, { op: 'lease' }>, 'op'>): Promise<LeaseReply> {
    return this.call({ op: 'lease', ...request }, request.tenant);
  }

  heartbeat(request: Omit<Extract<ControlRequest, { op: 'heartbeat' }>, 'op'>): Promise<HeartbeatReply> {
    return this.call({ op: 'heartbeat', ...request });
  }

  fence(request: Omit<Extract<ControlRequest, { op: 'fence' }>, 'op'>): Promise<FenceReply> {
    return this.call({ op: 'fence', ...request }, request.tenant);
  }

  progress(request: Omit<Extract<ControlRequest, { op: 'progress' }>, 'op'>): Promise<ProgressReply> {
    return this.call({ op: 'progress', ...request }, request.tenant);
  }

  settle(request: Omit<Extract<ControlRequest, { op: 'settle' }>, 'op'>): Promise<SettleReply> {
    return this.call({ op: 'settle', ...request }, request.tenant);
  }

  private async call<R extends ControlRequest>(request: R, tenant?: string): Promise<Reply<R['op']>> {
    const body = await this.broker.request(this.topology.controlQueue, encode(request), {
      timeoutMs: this.timeoutMs,
      ...(tenant ? { headers: { [tenantHeader]: tenant } } : {}),
    });
    const answer = decode(body) as ControlAnswer;
    if (answer.op === 'error') throw new ControlError(answer.code, answer.message);
    // A reply must answer this very request: same operation, same job and attempt.
    const answered = answer as { op: string; jobId?: string; attempt?: number };
    const asked = request as { jobId?: string; attempt?: number };
    if (answered.op !== request.op || answered.jobId !== asked.jobId || answered.attempt !== asked.attempt) {
      throw new ControlError('mismatched_reply', `a ${request.op} request was answered by a ${answered.op} reply`);
    }
    return answer as Reply<R['op']>;
  }
}
