/**
 * sweep: one pass of the sweeper at the ledger's current time. Its cost is what is due,
 * read through two partial indexes, never a scan of all jobs. Where the database locks
 * rows (PostgreSQL), due rows are read FOR UPDATE SKIP LOCKED: orchestrators sweeping at
 * once split the due rows between them instead of queueing behind each other, and a row
 * a settle holds is left to that settle (or to the next pass). Each exit is still a
 * guarded UPDATE (end-attempt.ts).
 *
 *   running@n, grant not taken up within grantWindowMs, no cancel requested
 *                                              -> queued@n, same attempt, lease cleared (abandon):
 *                                                 its open attempt row is deleted (the number is
 *                                                 granted again) and its work released again
 *   running@n, lease expired, cancel requested -> failed/cancelled   (cancel_running)
 *   running@n, lease expired, attempts left    -> queued@n+1 after backoff (expire)
 *   running@n, lease expired, none left        -> failed/exhausted   (exhaust)
 *   queued@n, due, work message released and unleased for redispatchAfterMs, no unsent work
 *   message waiting in the outbox, and its type among `redispatchTypes` (when given)
 *                                              -> a fresh work message for attempt n
 *
 * The bulk of a pass, the leases that go back to the queue, is requeued set-based
 * (requeueExpired); the statements that do it are each driver's bulk SQL (json_each on
 * SQLite, arrays on PostgreSQL), the decisions (which edge, which backoff) are made here.
 *
 * Params: limit? (rows of each kind per pass, default 1000), redispatchTypes?
 * Result: what it did, by job.
 */
import { defaultSweepLimit, type SweepParams, type SweepReport } from '../ledger.js';
import { expiryTransition, redispatchableTypes } from '../shared/lease-rules.js';
import { cancelledError, leaseExpiredError } from '../shared/recorded-errors.js';
import { fail, requeueExpired } from './end-attempt.js';
import { enqueueWork } from './outbox.js';
import { workMessage } from '../shared/outbox-messages.js';
import { run, type OperationEnv, type Plan } from './plan.js';
import type { ExpiredLease } from './statements.js';

export function* sweep(params: SweepParams = {}, env: OperationEnv): Plan<SweepReport> {
  const limit = params.limit ?? defaultSweepLimit;
  const { now } = env;
  const report: SweepReport = { abandoned: yield* abandonGrants(limit, env), requeued: [], exhausted: [], cancelled: [], redispatched: [] };

  const toRequeue: ExpiredLease[] = [];
  for (const lease of yield* run('selectExpiredLeases', { now, limit })) {
    const transition = expiryTransition(lease);
    if (transition === 'expire') {
      toRequeue.push(lease);
      continue;
    }
    // The job ends: its result message needs the whole row (read, and locked, above).
    const job = yield* run('selectJob', { jobId: lease.id });
    if (!job) throw new Error(`planrun ledger: sweep lost job ${lease.id} inside its transaction`);
    const exit = { job, expect: 'expired' as const };
    if (transition === 'cancel_running') {
      if (yield* fail(exit, 'cancelled', cancelledError, 'cancelled', env)) report.cancelled.push(lease.id);
    } else if (yield* fail(exit, 'exhausted', leaseExpiredError, 'expired', env)) report.exhausted.push(lease.id);
  }
  report.requeued.push(...(yield* requeueExpired(toRequeue, leaseExpiredError, env)));

  const redispatchable = redispatchableTypes(params);
  const redispatchAt = now + env.config.redispatchAfterMs;
  for (const job of yield* run('selectDueRedispatches', { now, limit })) {
    // A backlog in the relay, or in the broker's queue for busy workers, is not a lost message: wait for it rather than pile up copies.
    // Only a released attempt has a message to lose: a job waiting for the dispatcher has none.
    const released = job.dispatchedAttempt === job.attempt;
    if (released && redispatchable(job.type) && job.notBefore <= now && !(yield* run('hasUnsentWork', { jobId: job.id }))) {
      yield* enqueueWork(job, now, now);
      report.redispatched.push(job.id);
    }
    yield* run('postponeRedispatch', { jobId: job.id, attempt: job.attempt, redispatchAt });
  }
  return report;
}

/**
 * abandon: the grants nobody took up go back to queued at the same attempt. The old token
 * dies with the lease (anything later from it is refused as superseded); the attempt's open
 * history row is deleted, so the number is granted again and no attempt is spent. The work
 * goes out again: in fair mode the dispatcher releases it (dispatched_attempt is cleared),
 * in fifo mode its work message is written here.
 */
function* abandonGrants(limit: number, { now, config }: OperationEnv): Plan<Array<{ jobId: string; attempt: number }>> {
  if (config.grantWindowMs === null) return [];
  const grants = yield* run('selectAbandonedGrants', { now, limit });
  if (grants.length === 0) return [];
  const jobIds = grants.map((grant) => grant.id);
  const redispatchAt = now + config.redispatchAfterMs;
  const changed = yield* run('abandonGrants', { jobIds, now, redispatchAt });
  // The rows were read in this transaction with the same guard: anything else is a bug, and rolls the sweep back.
  if (changed !== grants.length) throw new Error(`planrun ledger: sweep took back ${changed} of ${grants.length} abandoned grants`);
  yield* run('deleteOpenAttempts', { jobIds });
  if (config.dispatch === 'fifo') {
    const messages = grants.map((grant) => ({ jobId: grant.id, body: JSON.stringify(workMessage(grant)) }));
    yield* run('insertWorkMessages', { messages, now, availableAt: now });
    yield* run('markDispatched', { jobs: grants.map((grant) => ({ jobId: grant.id, attempt: grant.attempt })), redispatchAt });
  }
  return grants.map((grant) => ({ jobId: grant.id, attempt: grant.attempt }));
}
