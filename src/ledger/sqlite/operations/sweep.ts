/**
 * sweep: one pass of the sweeper at the ledger's current time. Its cost is what is due,
 * read through two partial indexes, never a scan of all jobs.
 *
 *   running@n, lease expired, cancel requested -> failed/cancelled   (cancel_running)
 *   running@n, lease expired, attempts left    -> queued@n+1 after backoff (expire)
 *   running@n, lease expired, none left        -> failed/exhausted   (exhaust)
 *   queued@n, due, work message unleased for redispatchAfterMs, no unsent work
 *   message waiting in the outbox, and its type among `redispatchTypes` (when given)
 *                                              -> a fresh work message for attempt n
 *
 * Which edge an expired lease takes, and the error it records, are the rules every driver
 * shares (shared/lease-rules.ts, shared/recorded-errors.ts).
 *
 * Params: limit? (rows of each kind per pass, default 1000), redispatchTypes?
 * Result: what it did, by job.
 */
import { defaultSweepLimit, type SweepParams, type SweepReport } from '../../ledger.js';
import { expiryTransition, redispatchableTypes } from '../../shared/lease-rules.js';
import { cancelledError, leaseExpiredError } from '../../shared/recorded-errors.js';
import type { SqliteContext } from '../context.js';
import { type JobRow, selectJobById } from '../rows.js';
import { fail, requeueExpired, type ExpiredLease } from './end-attempt.js';
import { enqueueWork } from './outbox.js';

// The columns the expiry needs: a pass may read 10,000 rows, and most only go back to the queue.
const expiredLeases = `SELECT id, attempt, max_attempts, cancel_requested, tenant, type FROM jobs
  WHERE state = 'running' AND lease_deadline <= ? ORDER BY lease_deadline LIMIT ?`;
const dueRedispatches = `SELECT * FROM jobs WHERE state = 'queued' AND redispatch_at <= ? ORDER BY redispatch_at LIMIT ?`;
const unsentWork = `SELECT 1 FROM outbox WHERE job_id = ? AND kind = 'work' AND sent_at IS NULL LIMIT 1`;
const postponeRedispatch = `UPDATE jobs SET redispatch_at = ? WHERE id = ? AND state = 'queued' AND attempt = ?`;

export function sweep(ctx: SqliteContext, params: SweepParams = {}): SweepReport {
  const limit = params.limit ?? defaultSweepLimit;
  const now = ctx.clock.now();
  const report: SweepReport = { requeued: [], exhausted: [], cancelled: [], redispatched: [] };

  const toRequeue: ExpiredLease[] = [];
  const expired = ctx.sql(expiredLeases).all(now, limit) as Array<ExpiredLease & Pick<JobRow, 'max_attempts' | 'cancel_requested'>>;
  for (const lease of expired) {
    const transition = expiryTransition({ attempt: lease.attempt, maxAttempts: lease.max_attempts, cancelRequested: lease.cancel_requested === 1 });
    if (transition === 'expire') {
      toRequeue.push(lease);
      continue;
    }
    // The job ends: its result message needs the whole row.
    const exit = { row: ctx.sql(selectJobById).get(lease.id) as JobRow, expect: 'expired' as const };
    if (transition === 'cancel_running') {
      if (fail(ctx, exit, 'cancelled', cancelledError, 'cancelled')) report.cancelled.push(lease.id);
    } else if (fail(ctx, exit, 'exhausted', leaseExpiredError, 'expired')) report.exhausted.push(lease.id);
  }
  report.requeued.push(...requeueExpired(ctx, toRequeue, leaseExpiredError));

  const redispatchable = redispatchableTypes(params);
  for (const row of ctx.sql(dueRedispatches).all(now, limit) as JobRow[]) {
    // A backlog in the relay, or in the broker's queue for busy workers, is not a lost message: wait for it rather than pile up copies.
    if (redispatchable(row.type) && !ctx.sql(unsentWork).get(row.id) && row.not_before <= now) {
      enqueueWork(ctx, row, now);
      report.redispatched.push(row.id);
    }
    ctx.sql(postponeRedispatch).run(now + ctx.config.redispatchAfterMs, row.id, row.attempt);
  }
  return report;
}
