import { Listeners } from '../core/listeners.js';
import type { SerializedError } from '../core/errors.js';

/** What a worker reports about its work: for tests, logs and the fault-injection history. */
export type WorkerEvent =
  | { type: 'duplicate_dropped'; jobId: string; attempt: number }
  | { type: 'admission_refused'; jobId: string; attempt: number; reason: string }
  /** `late`: granted after the worker had stopped waiting for the answer, and used all the same. */
  | { type: 'lease_granted'; jobId: string; attempt: number; token: string; late?: true }
  | { type: 'lease_refused'; jobId: string; attempt: number; reason: string }
  /** A lease granted after the worker stopped waiting, that it could not use: the lease runs out unused. */
  | { type: 'late_grant_unused'; jobId: string; attempt: number; reason: 'stopping' | 'running' | 'lease_near_end' | 'not_admitted' }
  | { type: 'lease_lost'; jobId: string; attempt: number; reason: string }
  | { type: 'progress'; jobId: string; attempt: number; fraction: number }
  | { type: 'fenced_out'; jobId: string; attempt: number; reason: string }
  | { type: 'output_stored'; jobId: string; attempt: number; outputs: Record<string, string> }
  | { type: 'settled'; jobId: string; attempt: number; state: string; transition: string }
  | { type: 'settle_refused'; jobId: string; attempt: number; reason: string }
  | { type: 'abandoned'; jobId: string; attempt: number; reason: string }
  /** The worker released the lease (Fatal, or stopping): `outcome` is the ledger's edge, `refused <reason>` or `unconfirmed`. */
  | { type: 'handed_back'; jobId: string; attempt: number; code: string; outcome: string }
  | { type: 'job_done'; jobId: string; attempt: number }
  | { type: 'heartbeat'; renewed: number; lost: number }
  | { type: 'fatal'; error: SerializedError };

export class WorkerEvents extends Listeners<WorkerEvent> {}
