/**
 * sweep: one pass of the sweeper at the ledger's current time. Its cost is what is due,
 * read through two partial indexes, never a scan of all jobs. Due rows are read
 * FOR UPDATE SKIP LOCKED: orchestrators sweeping at once split the due rows between them
 * instead of queueing behind each other, and a row a settle holds is left to that settle
 * (or to the next pass). Each exit is still the guarded UPDATE of end-attempt.ts.
 *
 *   running@n, lease expired, cancel requested -> failed/cancelled   (cancel_running)
 *   running@n, lease expired, attempts left    -> queued@n+1 after backoff (expire)
 *   running@n, lease expired, none left        -> failed/exhausted   (exhaust)
 *   queued@n, due, work message unleased for redispatchAfterMs, no unsent work
 *   message waiting in the outbox, and its type among `redispatchTypes` (when given)
 *                                              -> a fresh work message for attempt n
 *
 * Params: limit? (rows of each kind per pass, default 1000), redispatchTypes?
 * Result: what it did, by job.
 */
import { defaultSweepLimit, type SweepParams, type SweepReport } from '../../ledger.js';
import { expiryTransition, redispatchableTypes } from '../../shared/lease-rules.js';
import { cancelledError, leaseExpiredError } from '../../shared/recorded-errors.js';
import type { PgContext } from '../context.js';
import { type JobRow, selectJobById } from '../rows.js';
import { fail, requeueExpired, type ExpiredLease } from './end-attempt.js';
import { enqueueWork } from './outbox.js';

// The columns the expiry needs: a pass may read 10,000 rows, and most only go back to the queue.
const expiredLeases = `SELECT id, attempt, max_attempts, cancel_requested, tenant, type FROM jobs
  WHERE state = 'running' AND lease_deadline <= $1
  ORDER BY lease_deadline LIMIT $2 FOR UPDATE SKIP LOCKED`;
const dueRedispatches = `SELECT * FROM jobs WHERE state = 'queued' AND redispatch_at <= $1
  ORDER BY redispatch_at LIMIT $2 FOR UPDATE SKIP LOCKED`;
const unsentWork = `SELECT 1 FROM outbox WHERE job_id = $1 AND kind = 'work' AND sent_at IS NULL LIMIT 1`;
const postponeRedispatch = `UPDATE jobs SET redispatch_at = $1 WHERE id = $2 AND state = 'queued' AND attempt = $3`;

export async function sweep(ctx: PgContext, params: SweepParams = {}): Promise<SweepReport> {
  const limit = params.limit ?? defaultSweepLimit;
  const now = ctx.clock.now();
  const report: SweepReport = { requeued: [], exhausted: [], cancelled: [], redispatched: [] };

  const toRequeue: ExpiredLease[] = [];
  const expired = await ctx.rows<ExpiredLease & Pick<JobRow, 'max_attempts' | 'cancel_requested'>>(expiredLeases, [now, limit]);
  for (const lease of expired) {
    const transition = expiryTransition({ attempt: lease.attempt, maxAttempts: lease.max_attempts, cancelRequested: lease.cancel_requested });
    if (transition === 'expire') {
      toRequeue.push(lease);
      continue;
    }
    // The job ends: its result message needs the whole row (locked above).
    const exit = { row: (await ctx.row<JobRow>(selectJobById, [lease.id]))!, expect: 'expired' as const, now };
    if (transition === 'cancel_running') {
      if (await fail(ctx, exit, 'cancelled', cancelledError, 'cancelled')) report.cancelled.push(lease.id);
    } else if (await fail(ctx, exit, 'exhausted', leaseExpiredError, 'expired')) report.exhausted.push(lease.id);
  }
  report.requeued.push(...(await requeueExpired(ctx, toRequeue, leaseExpiredError, now)));

  const redispatchable = redispatchableTypes(params);
  for (const row of await ctx.rows<JobRow>(dueRedispatches, [now, limit])) {
    // A backlog in the relay, or in the broker's queue for busy workers, is not a lost message: wait for it rather than pile up copies.
    if (redispatchable(row.type) && !(await ctx.row(unsentWork, [row.id])) && row.not_before <= now) {
      await enqueueWork(ctx, row, now, now);
      report.redispatched.push(row.id);
    }
    await ctx.run(postponeRedispatch, [now + ctx.config.redispatchAfterMs, row.id, row.attempt]);
  }
  return report;
}
