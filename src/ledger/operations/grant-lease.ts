/**
 * grant: queued@n -> running@n, with a fresh lease token and deadline, and the attempt's
 * history row. The guarded UPDATE decides: of two workers (or two orchestrators) racing
 * for the same (job, n), the second one's UPDATE finds the row running and changes nothing.
 *
 * A repeated request from the worker process that already holds the live lease of attempt
 * n (the same worker with the same holderProof) returns that same lease, renewed (a second
 * guarded UPDATE, keyed to the holder, its proof and a live, uncancelled lease): its earlier
 * answer was lost, e.g. it arrived after the worker's request had timed out, and the job
 * must not wait a TTL for nobody. A grant its holder never takes up (no renewal, progress or
 * settle within grantWindowMs) is taken back by the sweep (edge abandon). Anyone else, the same worker name included, is refused:
 * the token goes only to its holder.
 *
 * Params: jobId, attempt n (from the work message), worker, holderProof (optional), tenant
 *   (optional: the guarded UPDATEs hold it too, so another tenant's job is never granted)
 * Result: { granted: true, job, token, deadline } or { granted: false, reason } with reason
 *   unknown_job      no such job (or another tenant's)
 *   ended            the job already finished or failed
 *   other_attempt    the job is at another attempt: this work message is stale
 *   already_running  attempt n is already leased
 *   not_due          attempt n waits for its backoff
 * Throws: LedgerError invalid_input for a worker id holding a NUL.
 */
import { randomUUID } from 'node:crypto';

import type { GrantLeaseParams, GrantLeaseResult } from '../ledger.js';
import { validateWorkerId } from '../shared/input-validation.js';
import { grantRefusal, ofTenant } from '../shared/lease-rules.js';
import { run, type OperationEnv, type Plan } from './plan.js';

/** Rounds of UPDATE-then-read; see below. */
const TRIES = 3;

export function* grantLease(params: GrantLeaseParams, env: OperationEnv): Plan<GrantLeaseResult> {
  validateWorkerId(params.worker);
  const { jobId, attempt, worker } = params;
  const tenant = params.tenant ?? null;
  const { now } = env;
  const deadline = now + env.config.leaseTtlMs;
  const proof = params.holderProof ?? null;
  // Taken back (sweep.ts, edge abandon) unless its holder renews, reports progress or settles by then.
  const abandonAt = env.config.grantWindowMs === null ? null : now + env.config.grantWindowMs;
  // A refusal is read after the UPDATE failed. Where writers run side by side (PostgreSQL,
  // READ COMMITTED) the job may have reached queued@n in between (a settle committed), so
  // the guard may hold now and the UPDATE is tried again; with one writer (SQLite) the
  // first read always names the reason.
  for (let tries = 0; tries < TRIES; tries++) {
    const token = randomUUID();
    const granted = yield* run('grantLease', { jobId, tenant, attempt, worker, proof, token, deadline, now, abandonAt });
    if (granted) {
      yield* run('insertAttempt', { jobId, attempt, worker, now });
      return { granted: true, job: granted, token, deadline };
    }
    const renewed = proof === null ? undefined : yield* run('regrantLease', { jobId, tenant, attempt, worker, proof, deadline, now, abandonAt });
    if (renewed) return { granted: true, job: renewed, token: renewed.leaseToken!, deadline };
    const job = ofTenant(yield* run('selectJob', { jobId }), params.tenant);
    const reason = grantRefusal(job, attempt, now);
    if (reason) return { granted: false, reason, ...(job ? { job } : {}) };
  }
  throw new Error(`planrun ledger: grant of ${jobId}@${attempt} refused for no known reason`);
}
