/**
 * The bodies of outbox messages and the errors the ledger itself writes. Driver-neutral:
 * a candidate for src/ledger/ (the SQLite driver builds the same bodies in its outbox.ts).
 */
import type { SerializedError } from '../../../core/errors.js';
import type { Job, ResultMessage, WorkMessage } from '../../ledger.js';

export { cancelledError } from '../../sqlite/operations/end-attempt.js';

/** What the sweeper records when a lease ran out before its attempt ended. */
export const leaseExpiredError: SerializedError = {
  class: 'transient',
  code: 'lease_expired',
  message: 'the worker stopped renewing its lease (crashed, stopped or cut off) before the attempt ended',
};

export function workMessage(job: Pick<Job, 'id' | 'attempt' | 'tenant' | 'type'>): WorkMessage {
  return { jobId: job.id, attempt: job.attempt, tenant: job.tenant, type: job.type };
}

/** The one result-or-failure message of a terminal job. */
export function resultMessage(job: Job): ResultMessage {
  if (job.state !== 'finished' && job.state !== 'failed') {
    throw new Error(`planrun ledger: result message for job ${job.id} in state ${job.state}`);
  }
  return {
    id: job.id,
    idempotencyKey: job.idempotencyKey,
    tenant: job.tenant,
    type: job.type,
    state: job.state,
    attempt: job.attempt,
    ...(job.failureReason ? { reason: job.failureReason } : {}),
    ...(job.result ? { result: job.result } : {}),
    ...(job.error ? { error: job.error } : {}),
  };
}
