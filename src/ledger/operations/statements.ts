/**
 * The named statements every ledger driver supplies, in its own SQL dialect, and that the
 * operations (the plans of this folder) are written over. A statement does one thing to
 * the database and decides nothing: the choice of edge, the order of statements and
 * everything an operation answers are its plan's. What a statement must do is stated
 * here, and each driver's implementation (sqlite/statements.ts, postgres/statements.ts)
 * does exactly that; the conformance suite runs the same plans over both.
 *
 * Conventions:
 *   - a "guarded" statement changes a row only where its WHERE guard holds, and answers
 *     whether it did (a boolean) or the row as the change left it (undefined when the
 *     guard did not hold);
 *   - rows come back as the Ledger's own types (Job, ...), converted by the driver;
 *   - JSON values a plan writes (a result, an error for the history, an outbox body) are
 *     handed over as the JSON text to store, which the plan wrote;
 *   - times are the plan's `now` (OperationEnv), never read by a statement.
 */
import type { SerializedError } from '../../core/errors.js';
import type {
  ApiKeyRecord,
  ActiveJobCount,
  AttemptKey,
  AttemptRecord,
  FailedJobFilter,
  FailureGroup,
  FleetRecord,
  Job,
  KeyIdentity,
  OutboxKind,
  OutboxMessage,
  OutboxStats,
  PrunableJob,
  ResultMessage,
  StoredApiKey,
  RetryLinks,
  RunningLimit,
  WorkMessage,
  WorkerReport,
} from '../ledger.js';
import type { ValidSubmission } from '../shared/input-validation.js';
import type { LogEntry } from '../../wire/logs.js';
import type { ValidDispatch } from '../shared/dispatch-rules.js';
import type { AttemptOutcome, FailureReason, JobState } from '../states.js';

/** The live lease a statement is keyed to. */
export interface LeaseKey {
  jobId: string;
  attempt: number;
  token: string;
}

/** Whether an end of an attempt requires its lease to be live (settle, release) or expired (sweep). */
export type LeaseExpectation = 'live' | 'expired';

/**
 * The guard of every exit from running@n: the job is running at `attempt` with `token`,
 * its cancel flag is still `cancelRequested` (the edge was chosen from it), and its lease
 * is live (lease_deadline > now) or expired (lease_deadline <= now) as `expect` says.
 */
export interface AttemptGuard extends LeaseKey {
  cancelRequested: boolean;
  expect: LeaseExpectation;
  now: number;
}

export interface LedgerStatements {
  // Jobs, read.

  /** The job, or undefined when there is none. Takes no lock. */
  selectJob(params: { jobId: string }): Job | undefined;

  /**
   * The job, or undefined; where the database locks rows, locked until the transaction
   * ends, so that an edge chosen from it cannot change under the guarded UPDATE that applies it.
   */
  lockJob(params: { jobId: string }): Job | undefined;

  // Submit.

  /** The tenant's job submitted with `idempotencyKey`, or undefined. */
  selectJobByKey(params: { tenant: string; idempotencyKey: string }): Job | undefined;

  /**
   * Where other transactions may insert the same keys at once (PostgreSQL), takes a lock
   * per key (the JSON text [tenant, key]) until the transaction ends, always in one order,
   * so that two batches naming the same keys cannot deadlock. With one writer: nothing.
   */
  lockIdempotencyKeys(params: { keys: readonly string[] }): void;

  /**
   * The submit edge, (none) -> queued@1: a job row with the submission (input and requires
   * as their JSON text) and its dispatch fields (priority, concurrency key and limit, due
   * at dispatch.notBefore; dispatched_attempt as given: 1 when its work message is
   * written with it, null when the dispatcher releases it), redispatched at redispatchAt, created and updated at
   * now, everything else empty (cancel not requested). Where the (tenant, idempotency key)
   * is taken, it writes nothing. Answers whether it inserted.
   */
  insertJob(params: { id: string; submission: ValidSubmission; now: number; redispatchAt: number } & DispatchFields): boolean;

  // Grant, renew, progress.

  /**
   * Guarded, the grant edge queued@n -> running@n: where the job is queued at `attempt` and
   * due (not_before <= now), it becomes running with the lease (token, worker as holder,
   * proof, deadline), no redispatch time, started_at kept or set to now, and
   * grant_abandoned_at := abandonAt (null: never taken back). Answers the row after. A
   * non-null `tenant` guards too: another tenant's job is left as it is.
   */
  grantLease(params: {
    jobId: string;
    tenant: string | null;
    attempt: number;
    worker: string;
    proof: string | null;
    token: string;
    deadline: number;
    now: number;
    abandonAt: number | null;
  }): Job | undefined;

  /**
   * Guarded: lease_deadline := deadline where the job is running at `attempt`, held by
   * `worker` with the same (non-null) `proof`, its lease live at `now` and no cancel
   * requested; a grant still not taken up gets grant_abandoned_at := abandonAt (the answer to
   * this request may be lost too). Answers the row after (its token is the live lease's).
   * A non-null `tenant` guards too, as in grantLease.
   */
  regrantLease(params: {
    jobId: string;
    tenant: string | null;
    attempt: number;
    worker: string;
    proof: string;
    deadline: number;
    now: number;
    abandonAt: number | null;
  }): Job | undefined;

  /** The history row of attempt `attempt`, started by `worker` at `now`. */
  insertAttempt(params: { jobId: string; attempt: number; worker: string; now: number }): void;

  /**
   * Guarded: lease_deadline := deadline where the job is running at `attempt` with
   * `token`, its lease is live at `now` (deadline > now) and no cancel was requested; the
   * grant is taken up (grant_abandoned_at := null).
   */
  extendLease(params: LeaseKey & { deadline: number; now: number }): boolean;

  /** Guarded as extendLease: progress := fraction, progress_message := message, and the grant is taken up as by extendLease. */
  updateProgress(params: LeaseKey & { fraction: number; message: string | null; now: number }): boolean;

  // The exits from running@n (settle, release, sweep). They answer whether the guard held,
  // not the row: the plan knows the row after from the row it read (end-attempt.ts), and
  // reading it back costs more than the UPDATE (a sweep's batch, a burst of settles). Each
  // SETs exactly what its twin in end-attempt.ts says.

  /**
   * Guarded (AttemptGuard), running@n -> finished: result := the JSON text `result`,
   * lease token and deadline cleared, progress 1, ended and updated at now.
   */
  finishAttempt(params: AttemptGuard & { result: string }): boolean;

  /**
   * Guarded (AttemptGuard), running@n -> failed: failure_reason := reason, the error's
   * class, code and message kept, lease token and deadline cleared, ended and updated at now.
   */
  failAttempt(params: AttemptGuard & { reason: FailureReason; error: SerializedError }): boolean;

  /**
   * Guarded (AttemptGuard), running@n -> queued@n+1: due at notBefore, redispatched at
   * redispatchAt, lease (token, holder, deadline) and progress (fraction, message)
   * cleared, updated at now.
   */
  requeueAttempt(params: AttemptGuard & { notBefore: number; redispatchAt: number }): boolean;

  /** Ends the history row of `attempt` if still open: ended at now, its outcome, the error as JSON text (or null). */
  closeAttempt(params: { jobId: string; attempt: number; now: number; outcome: AttemptOutcome; error: string | null }): void;

  // The outbox.

  /** One outbox row with the JSON text `body`, created at now, due at availableAt. */
  insertOutbox(params: { kind: OutboxKind; jobId: string; body: string; now: number; availableAt: number }): void;

  /** Work messages for many jobs (JSON text bodies), all created at now and due at availableAt. */
  insertWorkMessages(params: { messages: ReadonlyArray<{ jobId: string; body: string }>; now: number; availableAt: number }): void;

  // Queued jobs that fail at once (cancel, reject, set aside), and cancel requests.

  /**
   * Guarded, queued@n -> failed: where the job is queued (at `attempt`, when not null),
   * failure_reason := reason, the error's class, code and message kept, no redispatch
   * time, ended and updated at now. Answers the row after.
   */
  failQueuedJob(params: { jobId: string; attempt: number | null; reason: FailureReason; error: SerializedError; now: number }): Job | undefined;

  /** Guarded: cancel_requested := true where the job is running, updated at now. Answers the row after. */
  requestCancel(params: { jobId: string; now: number }): Job | undefined;

  /** Takes the job's unsent work messages out of the outbox (sent at now, set aside with `reason`). */
  withdrawWork(params: { jobId: string; now: number; reason: string }): void;

  /**
   * Guarded: where outbox row `id` is unsent, it leaves the outbox (sent at now) set aside
   * with `reason`. Answers the row's kind, job and body, or undefined when it was not unsent.
   */
  setAsideOutboxRow(params: { id: number; now: number; reason: string }): OutboxRowRef | undefined;

  // The relay's side of the outbox.

  /**
   * Up to `limit` unsent outbox rows due at now (available_at <= now), in id order, bodies
   * parsed. Walks the unsent rows in id order and skips the few not yet due (backoffs), so
   * the cost is the rows returned plus the backoffs ahead of them, never a sort of the backlog.
   */
  selectDueOutbox(params: { now: number; limit: number }): OutboxMessage[];

  /**
   * As selectDueOutbox, leaving out rows claimed by a relay until after now
   * (claimed_until > now). Where the database locks rows, the rows are locked, skipping
   * those another transaction holds (another relay is claiming them).
   */
  selectClaimableOutbox(params: { now: number; limit: number }): OutboxMessage[];

  /** claimed_until := claimedUntil (null: no claim) for the unsent outbox rows `ids`. */
  claimOutboxRows(params: { ids: readonly number[]; claimedUntil: number | null }): void;

  /** Marks the outbox rows `ids` sent at now, where not sent already. */
  markOutboxSent(params: { ids: readonly number[]; now: number }): void;

  /** How many unsent rows are due at now, and the creation time of the oldest (null when none). */
  selectOutboxStats(params: { now: number }): OutboxStats;

  // Queries.

  /** The job's attempt history, by attempt number. */
  selectAttempts(params: { jobId: string }): AttemptRecord[];

  /**
   * Up to `limit` jobs, newest first (by insertion sequence), with each one's sequence
   * number; each filter, when not null, narrows: tenant, state, type, and seq < before.
   */
  selectJobPage(params: {
    tenant: string | null;
    state: JobState | null;
    type: string | null;
    before: number | null;
    limit: number;
  }): Array<{ seq: number; job: Job }>;

  /** How many jobs are in each state (states with none may be left out). */
  countJobsByState(params: Record<string, never>): Array<{ state: JobState; count: number }>;

  /**
   * Queued and running jobs counted by (state, type, tenant), read through the partial
   * index of active jobs; for queued ones also the least not_before among those due at
   * now (not_before <= now), null when none is.
   */
  selectActiveJobCounts(params: { now: number }): ActiveJobCount[];

  // Redrive and the holding area (issue 14). "Unretried failed jobs" below: state failed,
  // failure_reason not cancelled, no job_retries row with their id as job_id; narrowed by
  // each filter of FailedJobFilter not null (tenant, type, error_code = code,
  // ended_at >= endedAfter, ended_at < endedBefore).

  /** The retry links of a job: the job_id of the row whose retry_id it is, and the retry_id of the row whose job_id it is. */
  selectRetryLinks(params: { jobId: string }): RetryLinks;

  /** The link row (jobId retried by retryId, at now). */
  insertRetryLink(params: { jobId: string; retryId: string; now: number }): void;

  /**
   * Up to `limit` unretried failed jobs matching `filter`, earliest ended_at first; where
   * the database locks rows, locked, skipping those another transaction holds.
   */
  selectRetryCandidates(params: { filter: NullableFilter; limit: number }): Job[];

  /** Unretried failed jobs matching `filter`, grouped by (type, error_code): counts, earliest and latest ended_at, the greatest id; largest first. */
  selectFailureGroups(params: { filter: NullableFilter }): FailureGroup[];

  // Retention.

  /**
   * Up to `limit` ended jobs (ended_at <= endedBefore), earliest ended first, with no
   * unsent outbox row and no open upload grant, each one's id among `jobIds` when that is
   * not null. Where the database locks rows, those of `jobIds` are locked, skipping those
   * another transaction holds; a read of candidates (jobIds null) locks nothing.
   */
  selectPrunableJobs(params: { endedBefore: number; limit: number; jobIds: readonly string[] | null }): PrunableJob[];

  /** Deletes the jobs `jobIds` and every row of shared/job-owned-rows.ts that names them. Answers how many job rows went. */
  deleteJobs(params: { jobIds: readonly string[] }): number;

  // The sweep: due rows read through the partial indexes of what is due, and set-based
  // exits for the bulk of expired leases.

  /**
   * Up to `limit` running jobs whose lease ran out (lease_deadline <= now), earliest
   * deadline first; where the database locks rows, locked, skipping rows another
   * transaction holds (they are that transaction's, or the next pass's).
   */
  selectExpiredLeases(params: { now: number; limit: number }): ExpiredLease[];

  /**
   * Guarded, for every job of `jobIds` at once: running@attempt with an expired lease and
   * no cancel requested -> queued@attempt+1, as requeueAttempt. Answers how many changed.
   */
  requeueExpiredLeases(params: { jobIds: readonly string[]; attempt: number; now: number; notBefore: number; redispatchAt: number }): number;

  /** closeAttempt for every job of `jobIds` at `attempt`, outcome expired, with the error (JSON text). */
  closeExpiredAttempts(params: { jobIds: readonly string[]; attempt: number; now: number; error: string }): void;

  /**
   * Up to `limit` running jobs whose grant was never taken up (grant_abandoned_at <= now)
   * and no cancel requested, earliest first; locked and skipping as selectExpiredLeases.
   */
  selectAbandonedGrants(params: { now: number; limit: number }): AbandonedGrant[];

  /**
   * Guarded, the abandon edge for every job of `jobIds` at once: running, its grant not
   * taken up by `now` and no cancel requested -> queued at the same attempt, lease cleared,
   * redispatch_at := redispatchAt and dispatched_attempt := null (waiting for the
   * dispatcher). Answers how many changed.
   */
  abandonGrants(params: { jobIds: readonly string[]; now: number; redispatchAt: number }): number;

  /** Deletes the open history row (ended_at null) of every job of `jobIds`: its attempt number is granted again. */
  deleteOpenAttempts(params: { jobIds: readonly string[] }): void;

  /**
   * Up to `limit` queued jobs whose redispatch time has come (redispatch_at <= now),
   * earliest first; locked and skipping as selectExpiredLeases.
   */
  selectDueRedispatches(params: { now: number; limit: number }): DueRedispatch[];

  /** Whether the job has a work message in the outbox not yet sent. */
  hasUnsentWork(params: { jobId: string }): boolean;

  /** redispatch_at := redispatchAt where the job is still queued at `attempt`. */
  postponeRedispatch(params: { jobId: string; attempt: number; redispatchAt: number }): void;

  // The dispatcher (dispatch.ts).

  /**
   * Where several orchestrators dispatch from one database (PostgreSQL), a lock held until
   * the transaction ends, so that one dispatcher counts and releases at a time (an advisory
   * lock). With one writer: nothing.
   */
  lockDispatch(params: Record<string, never>): void;

  /**
   * The (type, tenant) pairs with queued jobs waiting for the dispatcher: due (not_before
   * <= now) and not released for their current attempt (dispatched_attempt differs from
   * attempt), with how many wait. Read through the partial index of queued jobs.
   */
  selectWaitingGroups(params: { now: number }): WaitingGroup[];

  /**
   * The (type, tenant) pairs that have queued jobs (waiting, released or not yet due), by
   * type then tenant. Read by skipping from one pair to the next through the partial index
   * of queued jobs: its cost is the pairs, not the jobs (a million queued jobs of one
   * tenant cost one step). No count, and no lock.
   */
  selectQueuedGroups(params: Record<string, never>): Array<{ type: string; tenant: string }>;

  /**
   * Up to `limit` of the tenant's queued jobs of `type` waiting for the dispatcher (as
   * selectWaitingGroups), highest priority first, then in submission order; where the
   * database locks rows, locked, skipping rows another transaction holds (a cancel, a
   * reject), so that markDispatched finds every row it is given still queued.
   */
  selectWaitingJobs(params: { type: string; tenant: string; now: number; limit: number }): WaitingJob[];

  /**
   * What holds capacity at now, by (tenant, type, concurrency key): live leases (running,
   * lease_deadline > now) and released work not leased yet (queued, dispatched_attempt =
   * attempt). A lease past its deadline holds nothing, whether or not a sweep took it back.
   */
  selectOccupancy(params: { now: number }): Occupancy[];

  /**
   * Guarded, for each (job, attempt) of `jobs`: where the job is still queued at that
   * attempt, dispatched_attempt := attempt and redispatch_at := redispatchAt. Answers how many changed.
   */
  markDispatched(params: { jobs: ReadonlyArray<{ jobId: string; attempt: number }>; redispatchAt: number }): number;

  /** What the dispatcher reads of one job (any state), with its released attempt; undefined when there is none. */
  selectWaitingJob(params: { jobId: string }): (WaitingJob & Pick<Job, 'state' | 'notBefore'> & { dispatchedAttempt: number | null }) | undefined;

  /** Every tenant weight set. */
  selectTenantWeights(params: Record<string, never>): Array<{ tenant: string; weight: number }>;

  /** Every running limit set ('' in tenant or type: any). */
  selectRunningLimits(params: Record<string, never>): RunningLimit[];

  /** The tenant's weight := weight (inserted or replaced); null removes it (weight 1). */
  setTenantWeight(params: { tenant: string; weight: number | null }): void;

  /** The limit of (tenant, type) := maxRunning (inserted or replaced); null removes it. */
  setRunningLimit(params: { tenant: string; type: string; maxRunning: number | null }): void;

  // The fleet.

  /**
   * Guarded upsert of the worker's fleet row: the report, the proof and last_heartbeat :=
   * now, where the worker has no row, or its row has the same proof, or its last heartbeat
   * was before `freeBefore`. Answers whether the row was written.
   */
  upsertFleetMember(params: { report: WorkerReport; proof: string; now: number; freeBefore: number }): boolean;

  /** The fleet rows heard from at `heardSince` or later, by worker name. */
  selectFleet(params: { heardSince: number }): FleetRecord[];

  // API keys: each key's digest, never the key.

  /** Inserts the key's row (its tenant NULL for an admin key); a taken id or digest fails the transaction. */
  insertApiKey(params: { key: StoredApiKey }): void;

  /** Inserts the key's row as given unless a row has its id or its digest; answers whether it did. */
  insertApiKeyUnlessKnown(params: { key: StoredApiKey }): boolean;

  /** Who the key with this digest acts for, where it is not revoked; else undefined. */
  selectWorkingApiKey(params: { keySha256: string }): KeyIdentity | undefined;

  /** The key with this id, revoked or not, or undefined. */
  selectApiKey(params: { id: string }): ApiKeyRecord | undefined;

  /** Every key, by created_at then id. */
  selectApiKeys(params: Record<string, never>): ApiKeyRecord[];

  /** Guarded: revoked_at := now where the key is not revoked; answers whether it was. */
  revokeApiKey(params: { id: string; now: number }): boolean;

  /** last_used_at := now where it is unset or earlier (it never moves back). */
  touchApiKey(params: { id: string; now: number }): void;

  // Upload grants: the attempts the fence handed presigned upload URLs, for the store cleaner.

  /**
   * The attempt's upload grant: inserted as signed at now, valid until validUntil; where
   * the attempt has one already, valid_until := the later of the two (signed_at kept).
   */
  upsertUploadGrant(params: { jobId: string; attempt: number; now: number; validUntil: number }): void;

  /**
   * Up to `limit` open upload grants (closed_at null) valid until `validBefore` or earlier,
   * unclaimed or whose claim ran out by now (claimed_until <= now), whose job decided the
   * attempt: the job ended, or is at a later attempt. Earliest valid_until first, read
   * through the partial index of open grants; with the job's tenant, state and attempt.
   * Where the database locks rows, the grants are locked, skipping those another
   * transaction holds.
   */
  selectDecidedUploadGrants(params: { now: number; validBefore: number; limit: number }): DecidedUploadGrant[];

  /** claimed_until := claimedUntil for the open grants of `attempts`. */
  claimUploadGrants(params: { attempts: readonly AttemptKey[]; claimedUntil: number }): void;

  /** Closes the open grants of `attempts`: closed at now, with `outcome`. */
  closeUploadGrants(params: { attempts: readonly AttemptKey[]; now: number; outcome: UploadGrantOutcome }): void;

  // Job logs: per attempt, a summary row and its chunks (one per batch of lines, head or tail).

  /** The attempt's log summary, or undefined when it has logged nothing. */
  selectLogSummary(params: AttemptKey): LogSummary | undefined;

  /** Inserts the attempt's log summary, or replaces every counter of the one there. */
  upsertLogSummary(params: LogSummary & { now: number }): void;

  /** One chunk of the attempt's log: `lines` as the JSON text of its entries. */
  insertLogChunk(params: AttemptKey & { seq: number; section: LogSection; bytes: number; lineCount: number; lines: string }): void;

  /** The first `limit` tail chunks of the attempt, oldest first: their sequence numbers and sizes, not their lines. */
  selectOldestTailChunks(params: AttemptKey & { limit: number }): Array<{ seq: number; bytes: number; lineCount: number }>;

  /** Deletes the attempt's tail chunks up to and including sequence number `throughSeq`. */
  deleteTailChunks(params: AttemptKey & { throughSeq: number }): void;

  /** The attempt's chunks after sequence number `afterSeq`, in order, their lines parsed. */
  selectLogChunks(params: AttemptKey & { afterSeq: number }): LogChunk[];
}

/** A chunk of an attempt's log is of its head (the first logHeadBytes, kept for good) or of its tail (pruned from the oldest). */
export type LogSection = 'head' | 'tail';

/** What a ledger keeps of an attempt's log besides its lines: where the head ends and what was dropped. */
export interface LogSummary extends AttemptKey {
  headBytes: number;
  /** A line did not fit in the head: every later line goes to the tail. */
  headClosed: boolean;
  tailBytes: number;
  droppedBytes: number;
  droppedLines: number;
  nextSeq: number;
}

export interface LogChunk {
  seq: number;
  section: LogSection;
  bytes: number;
  lines: LogEntry[];
}

/** FailedJobFilter with every filter present, null when not given: what a statement binds. */
export type NullableFilter = { [K in keyof FailedJobFilter]-?: Exclude<FailedJobFilter[K], undefined> | null };

/** How an attempt's upload grant was closed: its objects removed (it lost), or kept (it was delivered). */
export type UploadGrantOutcome = 'removed' | 'delivered';

/** An open upload grant whose job decided the attempt, with what the cleaner needs to judge it. */
export interface DecidedUploadGrant extends AttemptKey {
  tenant: string;
  jobState: JobState;
  jobAttempt: number;
}

/** What setAsideOutboxRow answers of the row it set aside. */
export type OutboxRowRef = { kind: 'work'; jobId: string; body: WorkMessage } | { kind: 'result'; jobId: string; body: ResultMessage };

/** What the sweep reads of a running job whose lease ran out: enough to choose its edge and requeue it. */
export type ExpiredLease = Pick<Job, 'id' | 'attempt' | 'maxAttempts' | 'cancelRequested' | 'tenant' | 'type'>;

/** What the sweep reads of a running job whose grant was never taken up. */
export type AbandonedGrant = Pick<Job, 'id' | 'attempt' | 'tenant' | 'type'>;

/** What the sweep reads of a queued job due for its work message again; dispatchedAttempt: the attempt its work was released for, if any. */
export type DueRedispatch = Pick<Job, 'id' | 'attempt' | 'tenant' | 'type' | 'notBefore'> & { dispatchedAttempt: number | null };

/** What insertJob writes besides the submission. */
export interface DispatchFields {
  dispatch: ValidDispatch;
  dispatchedAttempt: number | null;
}

/** Queued jobs of one type and tenant waiting for the dispatcher. */
export interface WaitingGroup {
  type: string;
  tenant: string;
  count: number;
}

/** What the dispatcher reads of a waiting job. */
export type WaitingJob = Pick<Job, 'id' | 'tenant' | 'type' | 'attempt' | 'priority' | 'concurrencyKey' | 'concurrencyLimit'>;

/** Capacity held by (tenant, type, concurrency key): live leases and released, unleased work. */
export interface Occupancy {
  tenant: string;
  type: string;
  concurrencyKey: string | null;
  running: number;
  released: number;
}
