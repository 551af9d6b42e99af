/**
 * grant: queued@n -> running@n, with a fresh lease token and deadline, and the attempt's
 * history row.
 *
 * Params: jobId, attempt n (from the work message), worker, holderProof (optional)
 * Result: { granted: true, job, token, deadline } or { granted: false, reason } with reason
 *   (a repeated request from the worker process that already holds the live lease of
 *   attempt n, the same worker with the same holderProof, returns that same lease,
 *   renewed: its earlier answer was lost, e.g. it arrived after the worker's request had
 *   timed out, and the job must not wait a TTL for nobody. Anyone else, the same worker
 *   name included, is refused already_running: the token goes only to its holder)
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
import type { SqliteContext } from '../context.js';
import { type JobRow, selectJobById, toJob } from '../rows.js';

const grant = `UPDATE jobs SET state = 'running', lease_token = @token, lease_holder = @worker, lease_proof = @proof,
    lease_deadline = @deadline, redispatch_at = NULL, started_at = COALESCE(started_at, @now), updated_at = @now
  WHERE id = @jobId AND state = 'queued' AND attempt = @attempt AND not_before <= @now`;
const insertAttempt = 'INSERT INTO attempts (job_id, attempt, worker, started_at) VALUES (?, ?, ?, ?)';
const regrant = `UPDATE jobs SET lease_deadline = @deadline, updated_at = @now
  WHERE id = @jobId AND state = 'running' AND attempt = @attempt AND lease_holder = @worker
    AND lease_proof = @proof AND lease_deadline > @now AND cancel_requested = 0`;

export function grantLease(ctx: SqliteContext, params: GrantLeaseParams): GrantLeaseResult {
  validateWorkerId(params.worker);
  const now = ctx.clock.now();
  const token = randomUUID();
  const deadline = now + ctx.config.leaseTtlMs;
  const proof = params.holderProof ?? null;
  const changed = ctx.sql(grant).run({ jobId: params.jobId, attempt: params.attempt, worker: params.worker, proof, token, deadline, now }).changes;
  const row = ctx.sql(selectJobById).get(params.jobId) as JobRow | undefined;
  if (changed === 1 && row) {
    ctx.sql(insertAttempt).run(params.jobId, params.attempt, params.worker, now);
    return { granted: true, job: toJob(row), token, deadline };
  }
  if (row && proof !== null && ctx.sql(regrant).run({ jobId: params.jobId, attempt: params.attempt, worker: params.worker, proof, deadline, now }).changes === 1) {
    const renewed = ctx.sql(selectJobById).get(params.jobId) as JobRow;
    return { granted: true, job: toJob(renewed), token: renewed.lease_token!, deadline };
  }
  const job = row ? toJob(row) : undefined;
  const reason = grantRefusal(job, params.attempt, now);
  if (!reason) throw new Error(`planrun ledger: grant of ${params.jobId}@${params.attempt} refused for no known reason`);
  return { granted: false, reason, ...(job ? { job } : {}) };
}
