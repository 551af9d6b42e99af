import { Listeners } from '../core/listeners.js';
import type { SerializedError } from '../core/errors.js';
import type { GrantRefusal, LeaseLoss, ReleaseResult } from '../ledger/ledger.js';
import type { AdmissionRefusal } from './admission.js';
import type { StoredFile } from '../wire/outputs.js';

/**
 * Why a running attempt lost its lease: the ledger said so (a heartbeat, a progress
 * report or the fence was refused), or the worker's own clock did, its local deadline
 * having passed without a confirmed renewal.
 */
export type LeaseLossReason = LeaseLoss | 'local_deadline_passed';

/** Why an attempt's outputs were not stored: its lease was lost, or, the ledger not answering, its local deadline had passed. */
export type FencedOutReason = LeaseLossReason | 'lease not live';

/** Why an attempt that returned says no more: its lease was lost (a cancelled one is settled as cancelled instead). */
export type AbandonReason = Exclude<LeaseLossReason, 'cancelled'>;

/** Why a settle was not applied: the ledger refused it, or no answer came while the lease was live by the local clock. */
export type SettleRefusal = LeaseLoss | 'unconfirmed';

/** Why a lease granted after the worker stopped waiting for it was not used. */
export type LateGrantUnused = 'stopping' | 'running' | 'lease_near_end' | 'not_admitted';

/** What became of a lease this worker handed back: the ledger's edge, its refusal, or no answer (the lease runs out). */
export type HandBackOutcome = Extract<ReleaseResult, { accepted: true }>['transition'] | `refused ${LeaseLoss}` | 'unconfirmed';

/** What a worker reports about its work: for tests, logs and the fault-injection history. */
export type WorkerEvent =
  | { type: 'duplicate_dropped'; jobId: string; attempt: number }
  | { type: 'admission_refused'; jobId: string; attempt: number; reason: AdmissionRefusal }
  /** `late`: granted after the worker had stopped waiting for the answer, and used all the same. */
  | { type: 'lease_granted'; jobId: string; attempt: number; token: string; late?: true }
  | { type: 'lease_refused'; jobId: string; attempt: number; reason: GrantRefusal }
  /** A lease granted after the worker stopped waiting, that it could not use: the lease runs out unused. */
  | { type: 'late_grant_unused'; jobId: string; attempt: number; reason: LateGrantUnused }
  | { type: 'lease_lost'; jobId: string; attempt: number; reason: LeaseLossReason }
  /** An input named by URL could not be fetched: the attempt ends with that error (`code`), the job's code never ran. */
  | { type: 'input_failed'; jobId: string; attempt: number; code: string }
  | { type: 'progress'; jobId: string; attempt: number; fraction: number }
  | { type: 'fenced_out'; jobId: string; attempt: number; reason: FencedOutReason }
  | { type: 'output_stored'; jobId: string; attempt: number; outputs: Record<string, string>; files: Record<string, StoredFile> }
  | { type: 'settled'; jobId: string; attempt: number; state: string; transition: string }
  | { type: 'settle_refused'; jobId: string; attempt: number; reason: SettleRefusal }
  | { type: 'abandoned'; jobId: string; attempt: number; reason: AbandonReason }
  /** The worker released the lease (Fatal, or stopping). */
  | { type: 'handed_back'; jobId: string; attempt: number; code: string; outcome: HandBackOutcome }
  | { type: 'job_done'; jobId: string; attempt: number }
  | { type: 'heartbeat'; renewed: number; lost: number }
  /** The heartbeat after a grant went unanswered while `leases` grants were not taken up yet: it is sent again. */
  | { type: 'grant_heartbeat_retried'; leases: number }
  | { type: 'fatal'; error: SerializedError };

export class WorkerEvents extends Listeners<WorkerEvent> {}
