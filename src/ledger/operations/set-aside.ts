/**
 * outboxSetAside: rows the relay can never publish leave the outbox with their reason; a
 * work row's job, still queued@n at the row's attempt n, takes the edge
 * queued@n -> failed/permanent with error code `undeliverable` (set_aside), and its
 * failure message is enqueued like any other. Rows already sent or set aside are skipped.
 *
 * Result: { failedJobs } (the jobs this call failed).
 */
import { undeliverableCode, type Job, type OutboxSetAside, type OutboxSetAsideResult } from '../ledger.js';
import { recordableText } from '../shared/input-validation.js';
import { enqueueResult } from './outbox.js';
import { run, type OperationEnv, type Plan } from './plan.js';

export function* outboxSetAside(rows: readonly OutboxSetAside[], { now }: OperationEnv): Plan<OutboxSetAsideResult> {
  const failedJobs: Job[] = [];
  for (const { id, reason } of rows) {
    const message = recordableText(reason);
    const row = yield* run('setAsideOutboxRow', { id, now, reason: message });
    if (row?.kind !== 'work') continue;
    const error = { class: 'permanent', code: undeliverableCode, message } as const;
    const job = yield* run('failQueuedJob', { jobId: row.jobId, attempt: row.body.attempt, reason: 'permanent', error, now });
    if (!job) continue;
    yield* enqueueResult(job, now);
    failedJobs.push(job);
  }
  return { failedJobs };
}
