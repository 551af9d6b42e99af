/**
 * grant: queued@n -> running@n, with a fresh lease token and deadline, and the attempt's
 * history row. The guarded UPDATE decides: of two workers (or two orchestrators) racing
 * for the same (job, n), the second one's UPDATE waits for the first to commit, re-reads
 * the row, finds it running and changes nothing.
 *
 * A repeated request from the worker process that already holds the live lease of attempt
 * n (the same worker with the same holderProof) returns that same lease, renewed (a second
 * guarded UPDATE, keyed to the holder, its proof and a live, uncancelled lease): its earlier
 * answer was lost, e.g. it arrived after the worker's request had timed out, and the job
 * must not wait a TTL for nobody. Anyone else, the same worker name included, is refused:
 * the token goes only to its holder.
 *
 * Params: jobId, attempt n (from the work message), worker, holderProof (optional)
 * Result: { granted: true, job, token, deadline } or { granted: false, reason } with reason
 *   unknown_job      no such job
 *   ended            the job already finished or failed
 *   other_attempt    the job is at another attempt: this work message is stale
 *   already_running  attempt n is already leased
 *   not_due          attempt n waits for its backoff
 * Throws: LedgerError invalid_input for a worker id holding a NUL.
 */
import { randomUUID } from 'node:crypto';

import type { GrantLeaseParams, GrantLeaseResult } from '../../ledger.js';
import { validateWorkerId } from '../../shared/input-validation.js';
import { grantRefusal } from '../../shared/lease-rules.js';
import type { PgContext } from '../context.js';
import { type JobRow, selectJobById, toJob } from '../rows.js';

const grant = `UPDATE jobs SET state = 'running', lease_token = $4, lease_holder = $3, lease_proof = $7,
    lease_deadline = $5, redispatch_at = NULL, started_at = COALESCE(started_at, $6), updated_at = $6
  WHERE id = $1 AND state = 'queued' AND attempt = $2 AND not_before <= $6
  RETURNING *`;
const insertAttempt = 'INSERT INTO attempts (job_id, attempt, worker, started_at) VALUES ($1, $2, $3, $4)';
const regrant = `UPDATE jobs SET lease_deadline = $4, updated_at = $5
  WHERE id = $1 AND state = 'running' AND attempt = $2 AND lease_holder = $3
    AND lease_proof = $6 AND lease_deadline > $5 AND NOT cancel_requested
  RETURNING *`;

export async function grantLease(ctx: PgContext, params: GrantLeaseParams): Promise<GrantLeaseResult> {
  validateWorkerId(params.worker);
  const now = ctx.clock.now();
  const deadline = now + ctx.config.leaseTtlMs;
  const proof = params.holderProof ?? null;
  // A refusal is read after the UPDATE failed; if the job reached queued@n in between
  // (a settle committed), the guard may hold now, so the UPDATE is tried again.
  for (let tries = 0; tries < 3; tries++) {
    const token = randomUUID();
    const granted = await ctx.row<JobRow>(grant, [params.jobId, params.attempt, params.worker, token, deadline, now, proof]);
    if (granted) {
      await ctx.run(insertAttempt, [params.jobId, params.attempt, params.worker, now]);
      return { granted: true, job: toJob(granted), token, deadline };
    }
    const renewed = proof === null ? undefined : await ctx.row<JobRow>(regrant, [params.jobId, params.attempt, params.worker, deadline, now, proof]);
    if (renewed) return { granted: true, job: toJob(renewed), token: renewed.lease_token!, deadline };
    const row = await ctx.row<JobRow>(selectJobById, [params.jobId]);
    const job = row ? toJob(row) : undefined;
    const reason = grantRefusal(job, params.attempt, now);
    if (reason) return { granted: false, reason, ...(job ? { job } : {}) };
  }
  throw new Error(`planrun ledger: grant of ${params.jobId}@${params.attempt} refused for no known reason`);
}
