/**
 * The exits from running@n, shared by settle and release (the worker reports) and sweep
 * (the lease ran out). Each is one guarded UPDATE keyed to (job, attempt, lease token), to
 * the cancel flag the caller decided on, and to the lease being live (settle, release) or
 * expired (sweep); it answers undefined, changing nothing, when the guard no longer holds.
 * On success it closes the attempt's history row and writes the outbox row that announces
 * what happened, in the caller's transaction, and answers the job as the UPDATE left it.
 *
 *   finish        running@n -> finished            + result message
 *   fail          running@n -> failed/<reason>     + failure message
 *   requeue       running@n -> queued@n+1 after backoff; in fifo mode with its work
 *                 message due then (a release: due at once, no backoff); in fair mode the
 *                 dispatcher releases attempt n+1 once it is due
 *   requeueExpired  the requeue of many expired leases at once (the sweep): three
 *                 set-based statements per attempt number instead of three per lease
 *
 * The job after an exit is not read back: `finished`, `failed` and `requeued` below say
 * what each exit's UPDATE sets (statements.ts states the same of finishAttempt,
 * failAttempt and requeueAttempt; keep them in step: the conformance suite checks on both
 * databases that what a settle or release answers is what getJob then reads). The caller
 * read the row in this transaction, locked where the database locks rows, so nothing else
 * changed it.
 */
import type { SerializedError } from '../../core/errors.js';
import { backoffFor, type Job, type JobResult } from '../ledger.js';
import type { AttemptOutcome, FailureReason } from '../states.js';
import { groupByAttempt } from '../shared/lease-rules.js';
import { workMessage } from '../shared/outbox-messages.js';
import { enqueueResult, enqueueWork } from './outbox.js';
import { run, type OperationEnv, type Plan } from './plan.js';
import type { AttemptGuard, ExpiredLease, LeaseExpectation } from './statements.js';

export interface Exit {
  /** The running job as the caller read it (locked, where the database locks rows). */
  job: Job;
  expect: LeaseExpectation;
}

function guard({ job, expect }: Exit, now: number): AttemptGuard {
  return { jobId: job.id, attempt: job.attempt, token: job.leaseToken ?? '', cancelRequested: job.cancelRequested, expect, now };
}

function* close(exit: Exit, now: number, outcome: AttemptOutcome, error: SerializedError | null): Plan<void> {
  yield* run('closeAttempt', { jobId: exit.job.id, attempt: exit.job.attempt, now, outcome, error: error ? JSON.stringify(error) : null });
}

export function* finish(exit: Exit, result: JobResult, { now }: OperationEnv): Plan<Job | undefined> {
  const text = JSON.stringify(result);
  if (!(yield* run('finishAttempt', { ...guard(exit, now), result: text }))) return undefined;
  const after = finished(exit.job, JSON.parse(text) as JobResult, now);
  yield* close(exit, now, 'finished', null);
  yield* enqueueResult(after, now);
  return after;
}

export function* fail(exit: Exit, reason: FailureReason, error: SerializedError, outcome: AttemptOutcome, { now }: OperationEnv): Plan<Job | undefined> {
  if (!(yield* run('failAttempt', { ...guard(exit, now), reason, error }))) return undefined;
  const after = failed(exit.job, reason, error, now);
  yield* close(exit, now, outcome, error);
  yield* enqueueResult(after, now);
  return after;
}

export function* requeue(
  exit: Exit,
  outcome: AttemptOutcome,
  error: SerializedError,
  { now, config }: OperationEnv,
  due: 'after_backoff' | 'now' = 'after_backoff',
): Plan<Job | undefined> {
  const notBefore = now + (due === 'now' ? 0 : backoffFor(config, exit.job.attempt));
  const redispatchAt = notBefore + config.redispatchAfterMs;
  if (!(yield* run('requeueAttempt', { ...guard(exit, now), notBefore, redispatchAt }))) return undefined;
  const after = requeued(exit.job, notBefore, now);
  yield* close(exit, now, outcome, error);
  // fair: attempt n+1 waits for the dispatcher (it was released for n, not n+1).
  if (config.dispatch === 'fifo') {
    yield* enqueueWork(after, now, notBefore);
    yield* run('markDispatched', { jobs: [{ jobId: after.id, attempt: after.attempt }], redispatchAt });
  }
  return after;
}

/** The job as finishAttempt leaves it. */
export function finished(job: Job, result: JobResult, now: number): Job {
  return { ...job, state: 'finished', result, leaseToken: null, leaseDeadline: null, progress: 1, endedAt: now, updatedAt: now };
}

/** The job as failAttempt leaves it. */
export function failed(job: Job, reason: FailureReason, error: SerializedError, now: number): Job {
  return {
    ...job,
    state: 'failed',
    failureReason: reason,
    error: { class: error.class, code: error.code, message: error.message },
    leaseToken: null,
    leaseDeadline: null,
    endedAt: now,
    updatedAt: now,
  };
}

/** The job as requeueAttempt leaves it. */
export function requeued(job: Job, notBefore: number, now: number): Job {
  return {
    ...job,
    state: 'queued',
    attempt: job.attempt + 1,
    notBefore,
    leaseToken: null,
    leaseHolder: null,
    leaseDeadline: null,
    progress: null,
    progressMessage: null,
    updatedAt: now,
  };
}

/**
 * `requeue` of many expired leases in one go, for the sweep: rows it read in its
 * transaction (and locked, where the database locks rows), each running with its lease
 * expired and no cancel asked. Row by row a 10,000-lease pass spent most of its time in
 * per-row statements (round trips, on PostgreSQL); grouped by attempt number (the backoff
 * depends on it) it is three set-based statements per group. Answers each job's new attempt.
 */
export function* requeueExpired(
  leases: readonly ExpiredLease[],
  error: SerializedError,
  { now, config }: OperationEnv,
): Plan<Array<{ jobId: string; attempt: number; type: string }>> {
  const requeuedLeases: Array<{ jobId: string; attempt: number; type: string }> = [];
  const errorText = JSON.stringify(error);
  for (const [attempt, group] of groupByAttempt(leases)) {
    const jobIds = group.map((lease) => lease.id);
    const notBefore = now + backoffFor(config, attempt);
    const redispatchAt = notBefore + config.redispatchAfterMs;
    const changed = yield* run('requeueExpiredLeases', { jobIds, attempt, now, notBefore, redispatchAt });
    // The rows were read in this transaction with the same guard: anything else is a bug, and rolls the sweep back.
    if (changed !== group.length) throw new Error(`planrun ledger: sweep requeued ${changed} of ${group.length} expired leases of attempt ${attempt}`);
    yield* run('closeExpiredAttempts', { jobIds, attempt, now, error: errorText });
    if (config.dispatch === 'fifo') {
      const messages = group.map((lease) => ({ jobId: lease.id, body: JSON.stringify(workMessage({ ...lease, attempt: attempt + 1 })) }));
      yield* run('insertWorkMessages', { messages, now, availableAt: notBefore });
      yield* run('markDispatched', { jobs: jobIds.map((jobId) => ({ jobId, attempt: attempt + 1 })), redispatchAt });
    }
    for (const lease of group) requeuedLeases.push({ jobId: lease.id, attempt: attempt + 1, type: lease.type });
  }
  return requeuedLeases;
}
