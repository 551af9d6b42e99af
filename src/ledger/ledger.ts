import type { SerializedError } from '../core/errors.js';
import type { JobLimits, JobResult, ResultMessage } from '../wire/jobs.js';
import type { LogDrop, LogEntry } from '../wire/logs.js';
import type { WaitingFor } from './shared/dispatch-rules.js';
import type { AttemptOutcome, FailureReason, JobState, Transition } from './states.js';

/**
 * The ledger: the one durable record of which jobs exist, which attempt runs where, and
 * how each one ended. Every operation is one guarded transaction (a compare-and-swap)
 * that returns what it changed or why it refused; a refusal is a value with a `reason`
 * code, never an exception. Exceptions are reserved for bad input (LedgerError with a
 * code) and for storage failures, after which nothing was changed.
 *
 * All times are milliseconds since the epoch and come from the ledger's injected clock,
 * never from a caller: a worker's clock never decides a deadline.
 *
 * No driver keeps a NUL character in a text field: a NUL in a name (tenant, type,
 * idempotency key, worker id, an error's code) is invalid_input naming the field, and each
 * NUL in free text job code wrote (an error's message, a progress message) is replaced by
 * U+FFFD. JSON values (input, requires, result) keep it as given. See shared/input-validation.ts.
 */
export interface Ledger {
  submit(params: SubmitParams): Promise<SubmitResult>;
  /** Many submissions in one transaction; each answer in the order given. */
  submitMany(params: SubmitParams[]): Promise<SubmitResult[]>;
  grantLease(params: GrantLeaseParams): Promise<GrantLeaseResult>;
  renewLeases(params: RenewLeasesParams): Promise<RenewLeasesResult>;
  /**
   * One worker heartbeat, in one transaction: records the worker's report in the fleet,
   * then renews its leases as renewLeases does. The report is refused, and no lease
   * renewed, when a member of that name was heard from within `windowMs` with another
   * proof: someone else is speaking for that worker, whose name is public (issue 18). The
   * name is free again once its member left the window.
   */
  heartbeat(params: HeartbeatParams): Promise<HeartbeatResult>;
  /** The fleet: the workers heard from within `windowMs`, by name, as their last heartbeat reported. */
  listFleet(params: { windowMs: number }): Promise<FleetRecord[]>;
  checkLease(params: LeaseRef): Promise<CheckLeaseResult>;
  /**
   * API keys (issue 12: in the ledger, so every orchestrator sharing it accepts the same
   * keys). The ledger keeps each key's SHA-256 digest, never the key; making the key and
   * its digest is the caller's (src/keys). createApiKey records a new key, created now.
   */
  createApiKey(params: NewApiKey): Promise<ApiKeyRecord>;
  /** Who the working (not revoked) key with this digest acts for; undefined for any other digest. */
  findApiKey(keySha256: string): Promise<KeyIdentity | undefined>;
  /** Whether the key with this id exists and is not revoked. */
  isApiKeyActive(id: string): Promise<boolean>;
  /** Every key, revoked ones included, oldest first. */
  listApiKeys(): Promise<ApiKeyRecord[]>;
  /** Revokes a key now: it is refused from then on and stays listed, as revoked. */
  revokeApiKey(id: string): Promise<RevokeOutcome>;
  /** Records a use of the key now (its last use only ever moves forward). */
  recordApiKeyUse(id: string): Promise<void>;
  /**
   * Adds keys kept elsewhere before (a `keys.db` of an older planrun), as they were: their
   * times, revocation and last use. A key whose id or digest the ledger already has is
   * left as the ledger has it, so importing the same keys again changes nothing. Answers
   * how many were added.
   */
  importApiKeys(keys: readonly StoredApiKey[]): Promise<number>;
  recordProgress(params: RecordProgressParams): Promise<FenceResult>;
  settle(params: SettleParams): Promise<SettleResult>;
  /**
   * A worker hands back a live lease it will not finish (a Fatal error, or it is stopping),
   * recording why on the attempt, so the next attempt is due at once instead of a TTL later.
   */
  release(params: ReleaseParams): Promise<ReleaseResult>;
  cancel(params: CancelParams): Promise<CancelResult>;
  /** Fails a queued job at once because no worker can run it. */
  reject(params: RejectParams): Promise<RejectResult>;
  /** One sweeper pass at the ledger's current time. */
  sweep(params?: SweepParams): Promise<SweepReport>;
  /**
   * One pass of the dispatcher (dispatch.ts): the sweep at the ledger's current time (unless
   * `sweep: false`), then, in the same transaction and with the capacity the sweep freed, the
   * release of work messages for waiting jobs (fair mode; in fifo mode only the sweep).
   */
  dispatch(params: DispatchParams): Promise<DispatchReport>;
  /** A tenant's weight in the fair share (null: back to 1). */
  setTenantWeight(params: { tenant: string; weight: number | null }): Promise<void>;
  /** The most live leases at once per tenant, per type or per (tenant, type) (null: no limit). */
  setRunningLimit(params: { tenant?: string; type?: string; maxRunning: number | null }): Promise<void>;
  /** Every weight and limit set, and the capacity held now per tenant and type. */
  dispatchState(): Promise<DispatchState>;
  /** Why a queued job has no work message in flight, or null when it has one (or is not queued). */
  waitingFor(jobId: string): Promise<WaitingFor | null>;
  /** The oldest unsent outbox rows that are due, oldest first. */
  outboxTake(limit: number): Promise<OutboxMessage[]>;
  /**
   * The relay's take: up to `limit` due unsent rows, oldest first, that no relay claims,
   * each claimed for `claimMs` so that the relays of other orchestrators on the same
   * ledger take other rows meanwhile. A claim that runs out (its relay died or stalled)
   * makes the row claimable again: nothing is lost, and a row is published twice only then.
   */
  outboxClaim(params: OutboxClaimParams): Promise<OutboxMessage[]>;
  /** Ends the claims on rows the relay could not publish (the broker failed), so the next claim takes them at once. */
  outboxUnclaim(ids: readonly number[]): Promise<void>;
  outboxMarkSent(ids: readonly number[]): Promise<void>;
  /**
   * Sets aside rows the relay can never publish (a name the broker refuses, a routing key
   * over AMQP's limit), so they stop holding up the rows behind them: each leaves the
   * outbox with its reason, and a work row's job, when still queued at that row's
   * attempt, fails permanently with code `undeliverable` (its failure message goes out
   * like any other). Rows already sent or set aside are left alone.
   */
  outboxSetAside(rows: readonly OutboxSetAside[]): Promise<OutboxSetAsideResult>;
  outboxStats(): Promise<OutboxStats>;
  /**
   * Records, before the fence hands them out, that an attempt is given presigned upload
   * URLs valid until `validUntil` (kept as the latest of its grants): the store cleaner
   * later removes what a losing attempt uploaded, without listing the whole bucket.
   */
  recordUploadGrant(params: UploadGrantParams): Promise<void>;
  /**
   * One batch of the store cleaner's work: attempts handed upload URLs whose job decided
   * them (ended, or moved to a later attempt) and whose last URL stopped working `graceMs`
   * ago or more. The delivered attempt (the one a finished job settled) is closed as kept
   * and not returned; each losing attempt returned is claimed for `claimMs`, so that an
   * orchestrator cleaning at the same time takes others (a claim that runs out, its
   * cleaner gone, is taken again: removing twice is harmless).
   */
  claimUploadCleanups(params: ClaimUploadCleanupsParams): Promise<UploadCleanupBatch>;
  /** Closes the attempts' upload records as removed, once their objects and uploads are gone. */
  markUploadsRemoved(attempts: readonly AttemptKey[]): Promise<void>;
  getJob(jobId: string, tenant?: string): Promise<Job | undefined>;
  getAttempts(jobId: string): Promise<AttemptRecord[]>;
  listJobs(params: ListJobsParams): Promise<JobPage>;
  countJobsByState(): Promise<Record<JobState, number>>;
  /**
   * Adds lines to the log of a live lease's attempt (refused, as a renewal is, when the
   * lease is not live; a requested cancel does not refuse them: a stopping job's last
   * words are worth keeping). Kept bounded: the first logHeadBytes of the attempt's log
   * and its last logTailBytes (give or take the last batch), with a count of the lines
   * between, which are dropped; `dropped` adds what the worker dropped before sending.
   */
  appendLogs(params: AppendLogsParams): Promise<FenceResult>;
  /** An attempt's log as kept, or the lines added after chunk `afterSeq` (see AttemptLogs). */
  readLogs(params: ReadLogsParams): Promise<AttemptLogs>;
  /**
   * Redrive (issue 14): a new job (new id, queued@1, with its work message) made from a
   * failed one of the tenant, with the same type, input, requirements, attempts and
   * timeout, and linked both ways (`getRetryLinks`). The failed job is not touched: it
   * keeps its failure and its one result message, and the new job gets its own. A job
   * retried before answers the job made from it then (`created` false), so a repeated
   * retry makes no second job. Cancelled jobs are failed jobs and can be retried too.
   */
  retry(params: RetryParams): Promise<RetryResult>;
  /**
   * One batch of a bulk redrive: up to `limit` failed jobs matching the filter that were
   * never retried, oldest end first, each retried as `retry` does, in one transaction. A
   * caller redrives everything by asking again until a batch comes back short. Jobs
   * failed as cancelled are left out (someone meant them to stop); retry them one by one.
   */
  retryMany(params: RetryManyParams): Promise<RetriedJob[]>;
  /** The job a job was made from by a retry, and the one a retry made from it, when there are. */
  getRetryLinks(jobId: string): Promise<RetryLinks>;
  /**
   * The holding area: the failed jobs never retried (cancelled ones left out, as in
   * retryMany), grouped by (type, error code), largest group first.
   */
  listFailureGroups(params: FailureGroupParams): Promise<FailureGroup[]>;
  /** Queued and running jobs by (state, type, tenant), with the oldest due queued job of each: what the metrics scrape. */
  countActiveJobs(): Promise<ActiveJobCount[]>;
  /**
   * Retention, step one: up to `limit` ended jobs that ended at `endedBefore` or earlier,
   * earliest first, whose result message went out (no unsent outbox row) and whose upload
   * records are closed (the store cleaner is done with them). Only reads.
   */
  findPrunableJobs(params: PrunableJobsParams): Promise<PrunableJob[]>;
  /**
   * Retention, step two: deletes those of `jobIds` still prunable as findPrunableJobs
   * says, with every row that names them (shared/job-owned-rows.ts). Rows another
   * transaction is deleting are skipped. Answers the ids it deleted.
   */
  pruneJobs(params: PruneJobsParams): Promise<string[]>;
  /**
   * Tells `listener` of every job change committed through any process sharing this
   * ledger (issue 12: several orchestrators on one PostgreSQL database), by job id, soon
   * after its commit. Answers once the feed first connected or failed to (`interrupted`);
   * a feed that drops says `interrupted`, then `resumed` once it reconnected: changes
   * committed in between are not told, so a listener looks again at what it watches. A
   * SQLite ledger is one process's: its feed tells nothing, that process knows its changes.
   */
  watchJobChanges(listener: JobChangeListener): Promise<JobChangeFeed>;
  close(): Promise<void>;
  /**
   * True where the writes asked for in one turn of the event loop run in one transaction,
   * in the order asked, each seeing the ones before it, and are answered once it committed
   * (SQLite's group commit): a write asked for right after another, before awaiting it, sees
   * it and shares its fsync. Where it is not true (PostgreSQL), such a write runs beside the
   * other and may not see it.
   */
  readonly writesOfATurnCommitTogether?: boolean;
}

export interface JobChangeListener {
  /** A change to this job was committed (by this process or another). */
  changed(jobId: string): void;
  /** The feed is down: changes go unheard until `resumed`. */
  interrupted(reason: string): void;
  /** The feed is back; what changed while it was down was not told. */
  resumed(): void;
}

export interface JobChangeFeed {
  /** Stops the feed (and its reconnects); nothing is told after it answered. */
  close(): Promise<void>;
}

export interface LedgerConfig {
  /** How long a lease lasts after a grant or renewal. */
  leaseTtlMs: number;
  /** Backoff before attempt n+1 after attempt n failed transiently or expired: base * 2^(n-1). */
  backoffBaseMs: number;
  /** Upper bound on one backoff. */
  backoffMaxMs: number;
  /** Attempts per job unless a submission says otherwise. */
  defaultMaxAttempts: number;
  /** A queued, due job whose work message has gone unleased this long gets it again. */
  redispatchAfterMs: number;
  /**
   * A grant its holder does not take up this long after it was granted (no renewal,
   * progress or settle) is taken back by the sweep: edge `abandon`, back to queued at the
   * same attempt (docs/state-machine.md). A worker renews a new lease at once, with the
   * heartbeat every grant sends (src/worker/worker.ts), so the window only has to cover one
   * control round trip and its timeout (the worker's controlTimeoutMs, 5 s), not the
   * heartbeat interval (30 s). null: a grant is only ever taken back by its lease's expiry.
   * A window at or beyond leaseTtlMs never fires before that expiry.
   */
  grantWindowMs: number | null;
  /**
   * When a queued job's work message is written: `fair`, by the dispatcher (dispatch.ts),
   * when a worker of its type has a free slot and no limit holds it back, in fair shares
   * between tenants; `fifo`, at submit and at each requeue, so the broker's queue holds
   * the whole backlog in submission order.
   */
  dispatch: DispatchMode;
}

export type DispatchMode = 'fair' | 'fifo';

export const defaultLedgerConfig: LedgerConfig = {
  leaseTtlMs: 90_000,
  backoffBaseMs: 2_000,
  backoffMaxMs: 300_000,
  defaultMaxAttempts: 3,
  redispatchAfterMs: 300_000,
  grantWindowMs: 15_000,
  dispatch: 'fair',
};

export function backoffFor(config: LedgerConfig, failedAttempt: number): number {
  return Math.min(config.backoffMaxMs, config.backoffBaseMs * 2 ** Math.max(0, failedAttempt - 1));
}

export interface Job {
  id: string;
  tenant: string;
  type: string;
  input: unknown;
  requires: string[];
  idempotencyKey: string | null;
  state: JobState;
  attempt: number;
  maxAttempts: number;
  /** How long one run may take (the worker ends it as `timeout` past it); null: the job type's or the worker's default. */
  timeoutSeconds: number | null;
  /** Resource limits of one run, as submitted (the worker enforces the lower of these and the job type's); null: the type's. */
  limits: JobLimits | null;
  /** Higher is released first among the tenant's waiting jobs of its type (default 0). */
  priority: number;
  /** At most concurrencyLimit live leases among the tenant's jobs with this key; null: none. */
  concurrencyKey: string | null;
  concurrencyLimit: number | null;
  notBefore: number;
  leaseToken: string | null;
  leaseHolder: string | null;
  leaseDeadline: number | null;
  cancelRequested: boolean;
  progress: number | null;
  progressMessage: string | null;
  result: JobResult | null;
  failureReason: FailureReason | null;
  error: SerializedError | null;
  createdAt: number;
  updatedAt: number;
  startedAt: number | null;
  endedAt: number | null;
}

/** A settled job's result and the result message's body are wire shapes, declared in src/wire/jobs.ts. */
export type { JobResult, ResultMessage } from '../wire/jobs.js';

export interface AttemptRecord {
  jobId: string;
  attempt: number;
  worker: string;
  startedAt: number;
  endedAt: number | null;
  outcome: AttemptOutcome | null;
  error: SerializedError | null;
}

export interface SubmitParams {
  tenant: string;
  type: string;
  input: unknown;
  requires?: string[];
  idempotencyKey?: string;
  maxAttempts?: number;
  /** How long one run may take, in whole seconds; absent: the job type's or the worker's default. */
  timeoutSeconds?: number;
  /** Resource limits of one run; they can only lower the job type's own. */
  limits?: JobLimits;
  /** Higher first within the tenant's share of its type (an integer, default 0). */
  priority?: number;
  /** Jobs of the tenant with the same key run at most concurrencyLimit (default 1) at once. */
  concurrencyKey?: string;
  concurrencyLimit?: number;
  /** Not started before this time (epoch ms); or delaySeconds after submit. At most one of the two. */
  runAt?: number;
  delaySeconds?: number;
}

export interface SubmitResult {
  job: Job;
  /** False when the idempotency key named an existing job, which is returned unchanged. */
  created: boolean;
}

export interface LeaseRef {
  jobId: string;
  attempt: number;
  token: string;
}

/** A request made for a tenant's job (a worker names the tenant of its work message). */
export interface TenantScoped {
  /** The job's tenant, as the asker names it: another tenant's job is answered `unknown_job`, as a missing one, and left as it is. Absent: any tenant's. */
  tenant?: string;
}

export interface GrantLeaseParams extends TenantScoped {
  jobId: string;
  attempt: number;
  worker: string;
  /**
   * A digest of a secret only the asking worker process holds, stored with the lease. A
   * repeated request gets the live lease (and its token) back only when it names the same
   * worker with the same proof: a worker name is public (attempts, the fleet), so alone it
   * proves nothing. Without a proof a request is never given a lease already granted.
   */
  holderProof?: string;
}

export const GrantRefusal = {
  /** No such job. */
  unknownJob: 'unknown_job',
  /** The job already finished or failed. */
  ended: 'ended',
  /** The job is at another attempt (this message is stale, or from the future). */
  otherAttempt: 'other_attempt',
  /** Attempt n is already leased (to this or another worker). */
  alreadyRunning: 'already_running',
  /** Attempt n waits for its backoff to pass. */
  notDue: 'not_due',
} as const;
export type GrantRefusal = (typeof GrantRefusal)[keyof typeof GrantRefusal];

export type GrantLeaseResult = { granted: true; job: Job; token: string; deadline: number } | { granted: false; reason: GrantRefusal; job?: Job };

export interface RenewLeasesParams {
  worker: string;
  leases: LeaseRef[];
}

export const LeaseLoss = {
  unknownJob: 'unknown_job',
  /** The lease's deadline passed (the sweeper may not have run yet). */
  expired: 'expired',
  /** The job is at another attempt or the token does not match: someone else holds it. */
  superseded: 'superseded',
  /** The job ended. */
  ended: 'ended',
  /** Its tenant cancelled it: the worker should stop and settle it as cancelled. */
  cancelled: 'cancelled',
} as const;
export type LeaseLoss = (typeof LeaseLoss)[keyof typeof LeaseLoss];

export interface RenewLeasesResult {
  renewed: Array<{ jobId: string; attempt: number; deadline: number }>;
  lost: Array<{ jobId: string; attempt: number; reason: LeaseLoss }>;
}

/** What a worker says about itself with every heartbeat. */
export interface WorkerReport {
  worker: string;
  jobTypes: string[];
  capabilities: string[];
  /** The job types it has but does not offer, each with the capabilities it lacks for it. */
  heldBack: Array<{ type: string; missing: string[] }>;
  slots: number;
  running: number;
}

export interface HeartbeatParams extends RenewLeasesParams {
  report: WorkerReport;
  /** The digest of the worker process's secret. */
  proof: string;
  /** How long a member counts as heard from: the fleet window. */
  windowMs: number;
}

/** `heardAt`: the member's last heartbeat as recorded (the ledger's time). */
export type HeartbeatResult = ({ recorded: true; heardAt: number } & RenewLeasesResult) | { recorded: false };

export interface FleetRecord extends WorkerReport {
  lastHeartbeat: number;
}

/** A tenant key acts for its one tenant; an admin key for every tenant (the dashboard, redrive). */
export type ApiKeyKind = 'tenant' | 'admin';

/** Who a key acts for: what the API needs to know of a request's key. */
export type KeyIdentity = { id: string; kind: 'tenant'; tenant: string } | { id: string; kind: 'admin' };

/** A key as listings show it: never the key itself, which only its creator ever sees. */
export interface ApiKeyRecord {
  /** Names the key for `revoke`. */
  id: string;
  kind: ApiKeyKind;
  /** The tenant a tenant key acts for; undefined for an admin key. */
  tenant: string | undefined;
  /** The first characters of the key. */
  prefix: string;
  createdAt: number;
  /** When a request last bore the key (to within what its recorder chose); undefined if never. */
  lastUsedAt: number | undefined;
  /** When it was revoked; undefined while it works. */
  revokedAt: number | undefined;
}

/** A new key, as its maker hands it to the ledger: the digest of the key, not the key. */
export interface NewApiKey {
  id: string;
  kind: ApiKeyKind;
  /** Required for a tenant key, absent for an admin key. */
  tenant?: string;
  /** Hex SHA-256 of the key. */
  keySha256: string;
  prefix: string;
}

/** A key as it was kept before it came to the ledger, for importApiKeys. */
export interface StoredApiKey extends ApiKeyRecord {
  keySha256: string;
}

export type RevokeOutcome = 'revoked' | 'already_revoked' | 'unknown';

export type CheckLeaseResult = { live: true; deadline: number } | { live: false; reason: LeaseLoss };

export type FenceResult = { accepted: true } | { accepted: false; reason: LeaseLoss };

export interface AppendLogsParams extends LeaseRef {
  lines: LogEntry[];
  /** What the worker dropped before these lines (the middle of a log printed faster than it could send). */
  dropped?: LogDrop;
}

export interface ReadLogsParams extends AttemptKey {
  /** Only the lines added after the chunk of this sequence number (a follower's last `lastSeq`). */
  afterSeq?: number;
}

/**
 * An attempt's log: its first lines (`head`), what was dropped after them, and its last
 * lines (`tail`, at most logTailBytes when read whole). `lastSeq` is the sequence number
 * of the last chunk read, for a follower's next `afterSeq`; 0 when there is none.
 */
export interface AttemptLogs {
  head: LogEntry[];
  dropped: LogDrop;
  tail: LogEntry[];
  lastSeq: number;
}

export interface RecordProgressParams extends LeaseRef {
  fraction: number;
  message?: string;
}

export type SettleOutcome = { kind: 'finished'; result: JobResult } | { kind: 'failed'; error: SerializedError };

export interface SettleParams extends LeaseRef, TenantScoped {
  outcome: SettleOutcome;
}

export type SettleResult =
  | { accepted: true; job: Job; transition: Extract<Transition, 'finish' | 'fail_permanent' | 'retry' | 'exhaust' | 'cancel_running'> }
  | { accepted: false; reason: LeaseLoss };

export interface ReleaseParams extends LeaseRef, TenantScoped {
  /** Why the worker hands the lease back, recorded on the attempt. */
  error: SerializedError;
}

export type ReleaseResult =
  { accepted: true; job: Job; transition: Extract<Transition, 'release' | 'exhaust' | 'cancel_running'> } | { accepted: false; reason: LeaseLoss };

export interface CancelParams {
  jobId: string;
  tenant?: string;
}

export type CancelResult =
  { outcome: 'cancelled'; job: Job } | { outcome: 'cancel_requested'; job: Job } | { outcome: 'refused'; reason: 'unknown_job' | 'ended'; job?: Job };

export interface RejectParams {
  jobId: string;
  error: SerializedError;
}

export type RejectResult = { rejected: true; job: Job } | { rejected: false; reason: 'unknown_job' | 'not_queued' };

/** Rows of each kind one sweep pass takes at most unless told otherwise. */
export const defaultSweepLimit = 1000;

export interface SweepParams {
  /** At most this many rows of each kind per pass (default `defaultSweepLimit`), so one pass stays bounded. */
  limit?: number;
  /**
   * Only queued jobs of these types get their work message again; for the others the
   * period restarts, as after a redispatch. The caller knows what the ledger cannot:
   * whether a worker of a type stands idle (so an unleased message of it must be lost or
   * stuck) or all are busy or gone (so it is only waiting). Without it, every type.
   */
  redispatchTypes?: readonly string[];
}

export interface DispatchParams extends SweepParams {
  /** The fleet whose slots are offered: the workers heard from within this window. */
  fleetWindowMs: number;
  /**
   * Work released per slot beyond the slot's own job (default 0): 1 keeps about one round
   * waiting in the broker, so a worker that finishes a job finds the next one there
   * instead of waiting for a settle, a dispatch pass and the relay to bring it.
   */
  aheadPerSlot?: number;
  /**
   * Whether the pass sweeps first (default true). A pass that does not only releases: the
   * dispatcher's passes woken by a submit or a settle, between the interval's passes that
   * sweep. It still never counts a lease past its deadline, swept or not.
   */
  sweep?: boolean;
}

export interface DispatchReport extends SweepReport {
  /** Jobs whose work message was released by this pass. */
  released: Array<{ jobId: string; attempt: number; tenant: string; type: string }>;
  /**
   * Some due job still waits for its release after this pass (held back by a full slot, a
   * limit or a concurrency key). Not a count: a pass reads only what it can release.
   */
  waiting: boolean;
  /**
   * Some job still waits, and each one waits for a slot of its type: every slot holds a job
   * and has its `aheadPerSlot` released behind it, so nothing more goes out until jobs end,
   * and a slot that ends one finds the next already in the broker.
   */
  slotsFull: boolean;
}

/** A running limit: '' in tenant or type stands for any. */
export interface RunningLimit {
  tenant: string;
  type: string;
  maxRunning: number;
}

export interface DispatchState {
  weights: Array<{ tenant: string; weight: number }>;
  limits: RunningLimit[];
  /** By tenant and type: jobs waiting for the dispatcher (due), and live leases. */
  usage: Array<{ tenant: string; type: string; queued: number; running: number }>;
}

export type { WaitingFor } from './shared/dispatch-rules.js';

export interface SweepReport {
  /** Grants never taken up (abandon), back to queued at the same attempt. */
  abandoned: Array<{ jobId: string; attempt: number }>;
  /** Expired leases moved to the next attempt (`type`: the job's, so that a caller counting them by type need not read each job). */
  requeued: Array<{ jobId: string; attempt: number; type: string }>;
  /** Expired leases with no attempts left. */
  exhausted: string[];
  /** Expired leases of jobs whose cancellation was requested. */
  cancelled: string[];
  /** Queued jobs whose work message was published again. */
  redispatched: string[];
}

export const OutboxKind = { work: 'work', result: 'result' } as const;
export type OutboxKind = (typeof OutboxKind)[keyof typeof OutboxKind];

/** A work message: what a worker needs to ask for the lease. */
export interface WorkMessage {
  jobId: string;
  attempt: number;
  tenant: string;
  type: string;
}

export type OutboxMessage =
  | { id: number; kind: 'work'; jobId: string; createdAt: number; availableAt: number; body: WorkMessage }
  | { id: number; kind: 'result'; jobId: string; createdAt: number; availableAt: number; body: ResultMessage };

export interface OutboxClaimParams {
  /** At most this many rows. */
  limit: number;
  /** How long the rows are this relay's before another may take them. */
  claimMs: number;
}

export interface OutboxSetAside {
  id: number;
  /** Why it cannot be published; becomes the failed job's error message. */
  reason: string;
}

export interface OutboxSetAsideResult {
  /** Jobs that failed as undeliverable (work rows of jobs still queued at that attempt). */
  failedJobs: Job[];
}

/** The error code of a job whose work message can never be published. */
export const undeliverableCode = 'undeliverable';

export interface OutboxStats {
  unsent: number;
  /** Creation time of the oldest unsent due row, or null when none. */
  oldestCreatedAt: number | null;
}

/** One attempt of one job. */
export interface AttemptKey {
  jobId: string;
  attempt: number;
}

export interface UploadGrantParams extends AttemptKey {
  /** When the URLs handed out now stop working (the lease's deadline plus the upload grace). */
  validUntil: number;
}

export interface ClaimUploadCleanupsParams {
  /** How long after an attempt's last URL stopped working its objects may be removed. */
  graceMs: number;
  /** At most this many attempts per batch. */
  limit: number;
  /** How long the batch is this caller's before another may take it. */
  claimMs: number;
}

/** A losing attempt whose objects are to be removed: its store prefix is `<tenant>/<job>/<attempt>/`. */
export interface UploadCleanup extends AttemptKey {
  tenant: string;
}

export interface UploadCleanupBatch {
  /** Losing attempts, claimed: remove their objects, then markUploadsRemoved. */
  remove: UploadCleanup[];
  /** How many delivered attempts this batch closed as kept. */
  kept: number;
}

export interface RetryParams {
  jobId: string;
  /** The caller's tenant: another tenant's job is `unknown_job`. Absent: any tenant's (an admin). */
  tenant?: string;
}

export type RetryResult =
  { outcome: 'retried'; job: Job; retryOf: string; created: boolean } | { outcome: 'refused'; reason: 'unknown_job' | 'not_failed'; job?: Job };

/** What a bulk redrive takes: failed jobs that match every filter given. */
export interface FailedJobFilter {
  /** Absent: every tenant's (an admin). */
  tenant?: string;
  type?: string;
  /** The error code they failed with. */
  code?: string;
  /** Ended at or after (ms since the epoch). */
  endedAfter?: number;
  /** Ended before (ms since the epoch). */
  endedBefore?: number;
}

export interface RetryManyParams extends FailedJobFilter {
  /** At most this many jobs in the batch. */
  limit: number;
}

export interface RetriedJob {
  /** The failed job. */
  retryOf: string;
  /** The job made from it. */
  job: Job;
}

export interface RetryLinks {
  retryOf: string | null;
  retriedBy: string | null;
}

export type FailureGroupParams = Pick<FailedJobFilter, 'tenant' | 'endedAfter' | 'endedBefore'>;

export interface FailureGroup {
  type: string;
  code: string;
  count: number;
  firstEndedAt: number;
  lastEndedAt: number;
  /** One job of the group, to look at. */
  sampleJobId: string;
}

export interface ActiveJobCount {
  state: 'queued' | 'running';
  type: string;
  tenant: string;
  count: number;
  /** Queued: since when the longest-waiting job that is due (past its backoff) has been due; null when none is. Running: null. */
  oldestDueSince: number | null;
}

export interface PrunableJobsParams {
  endedBefore: number;
  limit: number;
}

export interface PrunableJob {
  id: string;
  tenant: string;
  state: JobState;
  attempt: number;
  result: JobResult | null;
}

export interface PruneJobsParams {
  jobIds: readonly string[];
  /** The same cut-off findPrunableJobs was given. */
  endedBefore: number;
}

export interface ListJobsParams {
  tenant?: string;
  state?: JobState;
  type?: string;
  /** Opaque cursor returned by the previous page. */
  cursor?: string;
  limit?: number;
}

export interface JobPage {
  jobs: Job[];
  nextCursor: string | null;
}
