/**
 * The bodies of outbox messages, built from the Ledger's Job for every driver: the work
 * message of a job's current attempt and the one result-or-failure message of a terminal job.
 */
import type { Job, ResultMessage, WorkMessage } from '../ledger.js';

export function workMessage(job: Pick<Job, 'id' | 'attempt' | 'tenant' | 'type'>): WorkMessage {
  return { jobId: job.id, attempt: job.attempt, tenant: job.tenant, type: job.type };
}

/** The one result-or-failure message of a terminal job; throws for a job not yet ended. */
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
