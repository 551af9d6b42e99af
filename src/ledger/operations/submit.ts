/**
 * submit: (none) -> queued@1, plus the outbox row of its work message, in one transaction.
 *
 * Params: tenant, type, input (JSON-serialisable), requires?, idempotencyKey?, maxAttempts?,
 *         timeoutSeconds?
 * Result: { job, created }. A (tenant, idempotencyKey) seen before returns the existing
 *         job with created=false and writes nothing. Two orchestrators submitting the same
 *         key at once (PostgreSQL): the unique index lets one insert, the other finds its
 *         job; batches with several keys lock them in one order first, so they cannot deadlock.
 * Throws: LedgerError invalid_input, naming the field (a NUL in tenant, type or
 *         idempotencyKey included: shared/input-validation.ts). The whole batch is
 *         validated first, so an invalid submission writes none of it.
 */
import { randomUUID } from 'node:crypto';

import type { Job, SubmitParams, SubmitResult } from '../ledger.js';
import { validateSubmission, type ValidSubmission } from '../shared/input-validation.js';
import { enqueueWork } from './outbox.js';
import { run, type OperationEnv, type Plan } from './plan.js';

export function* submitMany(params: readonly SubmitParams[], env: OperationEnv): Plan<SubmitResult[]> {
  const valid = params.map((p) => validateSubmission(p, env.config.defaultMaxAttempts));
  const keys = new Set(valid.flatMap((v) => (v.idempotencyKey === null ? [] : [JSON.stringify([v.tenant, v.idempotencyKey])])));
  if (keys.size > 1) yield* run('lockIdempotencyKeys', { keys: [...keys] });
  const results: SubmitResult[] = [];
  for (const submission of valid) results.push(yield* submitOne(submission, env));
  return results;
}

export function* submit(params: SubmitParams, env: OperationEnv): Plan<SubmitResult> {
  return (yield* submitMany([params], env))[0]!;
}

function* submitOne(valid: ValidSubmission, { now, config }: OperationEnv): Plan<SubmitResult> {
  const { tenant, idempotencyKey } = valid;
  if (idempotencyKey !== null) {
    const existing = yield* run('selectJobByKey', { tenant, idempotencyKey });
    if (existing) return { job: existing, created: false };
  }
  const id = randomUUID();
  if (!(yield* run('insertJob', { id, submission: valid, now, redispatchAt: now + config.redispatchAfterMs }))) {
    // Another transaction inserted this key since our look-up and has committed by now.
    const existing = idempotencyKey === null ? undefined : yield* run('selectJobByKey', { tenant, idempotencyKey });
    if (!existing) throw new Error(`planrun ledger: idempotency key ${idempotencyKey} conflicted with no job`);
    return { job: existing, created: false };
  }
  const job = queuedJob(id, valid, now);
  yield* enqueueWork(job, now, now);
  return { job, created: true };
}

/** The job as insertJob writes it (not read back: a bulk submit would read every row it wrote). */
function queuedJob(id: string, valid: ValidSubmission, now: number): Job {
  return {
    id,
    tenant: valid.tenant,
    type: valid.type,
    input: JSON.parse(valid.input) as unknown,
    requires: JSON.parse(valid.requires) as string[],
    idempotencyKey: valid.idempotencyKey,
    state: 'queued',
    attempt: 1,
    maxAttempts: valid.maxAttempts,
    timeoutSeconds: valid.timeoutSeconds,
    notBefore: now,
    leaseToken: null,
    leaseHolder: null,
    leaseDeadline: null,
    cancelRequested: false,
    progress: null,
    progressMessage: null,
    result: null,
    failureReason: null,
    error: null,
    createdAt: now,
    updatedAt: now,
    startedAt: null,
    endedAt: null,
  };
}
