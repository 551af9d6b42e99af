/**
 * submit: (none) -> queued@1, in one transaction; in fifo mode with the outbox row of its
 * work message (due when the job is), in fair mode without: the dispatcher releases it.
 *
 * Params: tenant, type, input (JSON-serialisable), requires?, idempotencyKey?, maxAttempts?,
 *         timeoutSeconds?, priority?, concurrencyKey?, concurrencyLimit?, runAt? or delaySeconds?
 * Result: { job, created }. A (tenant, idempotencyKey) seen before with the same
 *         submission returns the existing job with created=false and writes nothing. Two orchestrators submitting the same
 *         key at once (PostgreSQL): the unique index lets one insert, the other finds its
 *         job; batches with several keys lock them in one order first, so they cannot deadlock.
 * Throws: LedgerError idempotency_conflict when a key seen before comes with another
 *         type, input, requires, timeoutSeconds or (when given) maxAttempts, naming the
 *         key, the job and what differs: a key names one submission, so a client that
 *         reuses one by mistake hears of it instead of silently getting another job's answer.
 *         LedgerError invalid_input, naming the field (a NUL in tenant, type or
 *         idempotencyKey included: shared/input-validation.ts). The whole batch is
 *         validated first, so an invalid submission writes none of it.
 */
import { randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';

import { LedgerError, LedgerErrorCode } from '../errors.js';
import type { JobLimits } from '../../wire/jobs.js';
import type { Job, SubmitParams, SubmitResult } from '../ledger.js';
import { validateDispatch, type ValidDispatch } from '../shared/dispatch-rules.js';
import { validateSubmission, type ValidSubmission } from '../shared/input-validation.js';
import { enqueueWork } from './outbox.js';
import { run, type OperationEnv, type Plan } from './plan.js';

export function* submitMany(params: readonly SubmitParams[], env: OperationEnv): Plan<SubmitResult[]> {
  const valid = params.map((p) => ({
    ...validateSubmission(p, env.config.defaultMaxAttempts),
    maxAttemptsGiven: p.maxAttempts !== undefined,
    dispatch: validateDispatch(p, env.now),
  }));
  const keys = new Set(valid.flatMap((v) => (v.idempotencyKey === null ? [] : [JSON.stringify([v.tenant, v.idempotencyKey])])));
  if (keys.size > 1) yield* run('lockIdempotencyKeys', { keys: [...keys] });
  const results: SubmitResult[] = [];
  for (const { maxAttemptsGiven, dispatch, ...submission } of valid) results.push(yield* submitOne(submission, dispatch, maxAttemptsGiven, env));
  return results;
}

export function* submit(params: SubmitParams, env: OperationEnv): Plan<SubmitResult> {
  return (yield* submitMany([params], env))[0]!;
}

function* submitOne(valid: ValidSubmission, dispatch: ValidDispatch, maxAttemptsGiven: boolean, env: OperationEnv): Plan<SubmitResult> {
  const { tenant, idempotencyKey } = valid;
  if (idempotencyKey !== null) {
    const existing = yield* run('selectJobByKey', { tenant, idempotencyKey });
    if (existing) return sameJob(existing, valid, maxAttemptsGiven);
  }
  const job = yield* insertQueuedJob(randomUUID(), valid, dispatch, env);
  if (!job) {
    // Another transaction inserted this key since our look-up and has committed by now.
    const existing = idempotencyKey === null ? undefined : yield* run('selectJobByKey', { tenant, idempotencyKey });
    if (!existing) throw new Error(`planrun ledger: idempotency key ${idempotencyKey} conflicted with no job`);
    return sameJob(existing, valid, maxAttemptsGiven);
  }
  return { job, created: true };
}

/**
 * Writes a new queued@1 job (a submission's, or a redrive's): in fifo mode with its work
 * message, due when the job is; in fair mode without (the dispatcher releases it). Answers
 * undefined when its idempotency key was taken by another transaction.
 */
export function* insertQueuedJob(id: string, valid: ValidSubmission, dispatch: ValidDispatch, { now, config }: OperationEnv): Plan<Job | undefined> {
  const fifo = config.dispatch === 'fifo';
  const redispatchAt = dispatch.notBefore + config.redispatchAfterMs;
  if (!(yield* run('insertJob', { id, submission: valid, now, redispatchAt, dispatch, dispatchedAttempt: fifo ? 1 : null }))) return undefined;
  const job = queuedJob(id, valid, dispatch, now);
  if (fifo) yield* enqueueWork(job, now, dispatch.notBefore);
  return job;
}

/**
 * The job a key seen before names, if the submission is the one it was made from; the
 * input is compared as JSON values (PostgreSQL's jsonb keeps no key order). maxAttempts is
 * compared only when the repeat gives it: left out, it was the orchestrator's default.
 */
function sameJob(existing: Job, valid: ValidSubmission, maxAttemptsGiven: boolean): SubmitResult {
  const differences = [
    existing.type !== valid.type && 'type',
    !isDeepStrictEqual(existing.input, JSON.parse(valid.input)) && 'input',
    !isDeepStrictEqual(existing.requires, JSON.parse(valid.requires)) && 'requires',
    maxAttemptsGiven && existing.maxAttempts !== valid.maxAttempts && 'maxAttempts',
    existing.timeoutSeconds !== valid.timeoutSeconds && 'timeoutSeconds',
    !isDeepStrictEqual(existing.limits, valid.limits === null ? null : JSON.parse(valid.limits)) && 'limits',
  ].filter((field): field is string => field !== false);
  if (differences.length > 0) {
    throw new LedgerError(
      LedgerErrorCode.idempotencyConflict,
      `idempotency key ${JSON.stringify(valid.idempotencyKey)} was used for job ${existing.id} with another submission (its ${differences.join(', ')} differ)`,
    );
  }
  return { job: existing, created: false };
}

/** The job as insertJob writes it (not read back: a bulk submit would read every row it wrote). */
function queuedJob(id: string, valid: ValidSubmission, dispatch: ValidDispatch, now: number): Job {
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
    limits: valid.limits === null ? null : (JSON.parse(valid.limits) as JobLimits),
    priority: dispatch.priority,
    concurrencyKey: dispatch.concurrencyKey,
    concurrencyLimit: dispatch.concurrencyLimit,
    notBefore: dispatch.notBefore,
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
