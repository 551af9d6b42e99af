/**
 * The outbox: messages written in the same transaction as the ledger change they
 * announce, published later by the relay, and marked sent only after the broker
 * confirmed them.
 *
 *   enqueueWork(job, availableAt)   -> a work message for the job's current attempt
 *   enqueueResult(job)              -> the one result-or-failure message of a terminal job
 *                                      (a unique index refuses a second one)
 */
import type { Job } from '../ledger.js';
import { resultMessage, workMessage } from '../shared/outbox-messages.js';
import { run, type Plan } from './plan.js';

export function* enqueueWork(job: Pick<Job, 'id' | 'attempt' | 'tenant' | 'type'>, now: number, availableAt: number): Plan<void> {
  yield* run('insertOutbox', { kind: 'work', jobId: job.id, body: JSON.stringify(workMessage(job)), now, availableAt });
}

export function* enqueueResult(job: Job, now: number): Plan<void> {
  yield* run('insertOutbox', { kind: 'result', jobId: job.id, body: JSON.stringify(resultMessage(job)), now, availableAt: now });
}
