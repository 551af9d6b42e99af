/**
 * The ledger's named statements (operations/statements.ts says what each must do) in
 * SQLite's dialect, run synchronously on prepared better-sqlite3 statements inside the
 * write's SAVEPOINT. SQLite has one writer at a time, so nothing here locks rows: a row
 * read in a write cannot change before that write ends.
 */
import type {
  ActiveJobCount,
  ApiKeyRecord,
  AttemptKey,
  AttemptRecord,
  FailureGroup,
  FleetRecord,
  Job,
  JobResult,
  KeyIdentity,
  OutboxKind,
  OutboxMessage,
  OutboxStats,
  PrunableJob,
  RetryLinks,
  RunningLimit,
} from '../ledger.js';
import type { StatementParams as Params } from '../operations/plan.js';
import type {
  AttemptGuard,
  DecidedUploadGrant,
  DueRedispatch,
  ExpiredLease,
  AbandonedGrant,
  LedgerStatements,
  LogChunk,
  LogSection,
  LogSummary,
  Occupancy,
  OutboxRowRef,
  WaitingGroup,
  WaitingJob,
} from '../operations/statements.js';
import type { LogEntry } from '../../wire/logs.js';
import { jobOwnedRows } from '../shared/job-owned-rows.js';
import type { JobState } from '../states.js';
import { apiKeyColumns, apiKeyValues, type ApiKeyRow, toApiKeyRecord, toKeyIdentity } from '../shared/api-key-rows.js';
import type { SqliteContext } from './context.js';
import { type AttemptRow, type FleetRow, type JobRow, type OutboxRow, selectJobById, toAttempt, toFleetRecord, toJob, toOutboxMessage } from './rows.js';

const selectJobByKey = 'SELECT * FROM jobs WHERE tenant = ? AND idempotency_key = ?';
const insertJob = `INSERT INTO jobs (id, tenant, type, input, requires, idempotency_key, state, attempt, max_attempts,
    timeout_seconds, limits, not_before, redispatch_at, created_at, updated_at, priority, concurrency_key, concurrency_limit, dispatched_attempt)
  VALUES (@id, @tenant, @type, @input, @requires, @idempotencyKey, 'queued', 1, @maxAttempts,
    @timeoutSeconds, @limits, @notBefore, @redispatchAt, @now, @now, @priority, @concurrencyKey, @concurrencyLimit, @dispatchedAttempt)
  ON CONFLICT (tenant, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING`;

const grantLease = `UPDATE jobs SET state = 'running', lease_token = @token, lease_holder = @worker, lease_proof = @proof,
    lease_deadline = @deadline, redispatch_at = NULL, started_at = COALESCE(started_at, @now), updated_at = @now,
    grant_abandoned_at = @abandonAt
  WHERE id = @jobId AND state = 'queued' AND attempt = @attempt AND not_before <= @now
    AND (@tenant IS NULL OR tenant = @tenant)
  RETURNING *`;
const regrantLease = `UPDATE jobs SET lease_deadline = @deadline, updated_at = @now,
    grant_abandoned_at = CASE WHEN grant_abandoned_at IS NULL THEN NULL ELSE @abandonAt END
  WHERE id = @jobId AND state = 'running' AND attempt = @attempt AND lease_holder = @worker
    AND lease_proof = @proof AND lease_deadline > @now AND cancel_requested = 0 AND (@tenant IS NULL OR tenant = @tenant)
  RETURNING *`;
const insertAttempt = 'INSERT INTO attempts (job_id, attempt, worker, started_at) VALUES (@jobId, @attempt, @worker, @now)';

// The live, uncancelled lease (job, attempt, token) at @now.
const liveLease = `id = @jobId AND state = 'running' AND attempt = @attempt AND lease_token = @token
    AND lease_deadline > @now AND cancel_requested = 0`;

const extendLease = `UPDATE jobs SET lease_deadline = @deadline, grant_abandoned_at = NULL, updated_at = @now WHERE ${liveLease}`;
const updateProgress = `UPDATE jobs SET progress = @fraction, progress_message = @message, grant_abandoned_at = NULL, updated_at = @now
  WHERE ${liveLease}`;

// AttemptGuard: the exits from running@n.
const attemptGuard = `id = @jobId AND state = 'running' AND attempt = @attempt AND lease_token = @token
  AND cancel_requested = @cancelRequested
  AND CASE @expect WHEN 'live' THEN lease_deadline > @now ELSE lease_deadline <= @now END`;
const finishAttempt = `UPDATE jobs SET state = 'finished', result = @result, lease_token = NULL, lease_deadline = NULL,
    progress = 1, ended_at = @now, updated_at = @now
  WHERE ${attemptGuard}`;
const failAttempt = `UPDATE jobs SET state = 'failed', failure_reason = @reason, error_class = @errorClass,
    error_code = @errorCode, error_message = @errorMessage, error_log_tail = @errorLogTail, lease_token = NULL,
    lease_deadline = NULL, ended_at = @now, updated_at = @now
  WHERE ${attemptGuard}`;
const requeueAttempt = `UPDATE jobs SET state = 'queued', attempt = attempt + 1, not_before = @notBefore,
    redispatch_at = @redispatchAt, lease_token = NULL, lease_holder = NULL, lease_deadline = NULL,
    progress = NULL, progress_message = NULL, updated_at = @now
  WHERE ${attemptGuard}`;
const closeAttempt = `UPDATE attempts SET ended_at = @now, outcome = @outcome, error = @error
  WHERE job_id = @jobId AND attempt = @attempt AND ended_at IS NULL`;

const insertOutbox = 'INSERT INTO outbox (kind, job_id, body, created_at, available_at) VALUES (?, ?, ?, ?, ?)';

const failQueuedJob = `UPDATE jobs SET state = 'failed', failure_reason = @reason, error_class = @errorClass,
    error_code = @errorCode, error_message = @errorMessage, redispatch_at = NULL, ended_at = @now, updated_at = @now
  WHERE id = @jobId AND state = 'queued' AND (@attempt IS NULL OR attempt = @attempt)
  RETURNING *`;
const requestCancel = `UPDATE jobs SET cancel_requested = 1, updated_at = @now WHERE id = @jobId AND state = 'running'
  RETURNING *`;
const withdrawWork = `UPDATE outbox SET sent_at = @now, set_aside_reason = @reason
  WHERE job_id = @jobId AND kind = 'work' AND sent_at IS NULL`;
const setAsideOutboxRow = `UPDATE outbox SET sent_at = @now, set_aside_reason = @reason WHERE id = @id AND sent_at IS NULL
  RETURNING kind, job_id, body`;

// Walks the unsent rows in id order and skips the few not yet due.
const selectDueOutbox = `SELECT id, kind, job_id, body, created_at, available_at FROM outbox
  WHERE sent_at IS NULL AND available_at <= ? ORDER BY id LIMIT ?`;
// As selectDueOutbox. One process writes a SQLite ledger, so there is nothing to lock.
const selectClaimableOutbox = `SELECT id, kind, job_id, body, created_at, available_at FROM outbox
  WHERE sent_at IS NULL AND available_at <= @now AND (claimed_until IS NULL OR claimed_until <= @now) ORDER BY id LIMIT @limit`;
const claimOutboxRows = `UPDATE outbox SET claimed_until = @claimedUntil
  WHERE id IN (SELECT value FROM json_each(@ids)) AND sent_at IS NULL`;
const markOutboxSent = 'UPDATE outbox SET sent_at = ? WHERE id = ? AND sent_at IS NULL';
const selectOutboxStats = `SELECT COUNT(*) AS unsent, MIN(created_at) AS oldest FROM outbox WHERE sent_at IS NULL AND available_at <= ?`;

// A name held by another proof that was heard from lately keeps its row: the guard of the DO UPDATE.
const upsertFleetMember = `INSERT INTO fleet (worker, proof, job_types, capabilities, held_back, slots, running, last_heartbeat)
  VALUES (@worker, @proof, @jobTypes, @capabilities, @heldBack, @slots, @running, @now)
  ON CONFLICT (worker) DO UPDATE SET proof = excluded.proof, job_types = excluded.job_types,
    capabilities = excluded.capabilities, held_back = excluded.held_back, slots = excluded.slots,
    running = excluded.running, last_heartbeat = excluded.last_heartbeat
  WHERE fleet.proof = excluded.proof OR fleet.last_heartbeat < @freeBefore
  RETURNING worker`;
const selectFleet = 'SELECT * FROM fleet WHERE last_heartbeat >= ? ORDER BY worker';

const insertApiKey = `INSERT INTO api_keys (id, kind, tenant, key_sha256, prefix, created_at, last_used_at, revoked_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?)`;
const insertApiKeyUnlessKnown = `${insertApiKey} ON CONFLICT DO NOTHING RETURNING id`;
const selectWorkingApiKey = 'SELECT id, kind, tenant FROM api_keys WHERE key_sha256 = ? AND revoked_at IS NULL';
const selectApiKey = `SELECT ${apiKeyColumns} FROM api_keys WHERE id = ?`;
const selectApiKeys = `SELECT ${apiKeyColumns} FROM api_keys ORDER BY created_at, id`;
const revokeApiKey = 'UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL';
const touchApiKey = 'UPDATE api_keys SET last_used_at = @now WHERE id = @id AND (last_used_at IS NULL OR last_used_at < @now)';

const selectAttempts = 'SELECT * FROM attempts WHERE job_id = ? ORDER BY attempt';
// NULL filters match everything, so one prepared statement serves every combination.
const selectJobPage = `SELECT * FROM jobs
  WHERE (@tenant IS NULL OR tenant = @tenant) AND (@state IS NULL OR state = @state)
    AND (@type IS NULL OR type = @type) AND (@before IS NULL OR seq < @before)
  ORDER BY seq DESC LIMIT @limit`;
const countJobsByState = 'SELECT state, COUNT(*) AS count FROM jobs GROUP BY state';

// The sweep. Expired leases: the columns the expiry needs (a pass may read 10,000 rows,
// and most only go back to the queue). Sets of jobs are JSON arrays read with json_each.
//
// Each query of what is due names its partial index (INDEXED BY): without statistics,
// SQLite's planner prefers the equality on state of jobs_state_listing to the range on the
// due time, and then reads every running (or queued) job and sorts them, on every pass: 65 ms
// a pass with 100,000 live leases and nothing due, growing with the jobs. The bulk UPDATEs
// by id write +state so that its equality cannot pull them onto that index either: they
// look their rows up by id, instead of walking every job in the state (a scan per statement).
const selectExpiredLeases = `SELECT id, attempt, max_attempts, cancel_requested, tenant, type FROM jobs INDEXED BY jobs_lease_due
  WHERE state = 'running' AND lease_deadline <= ? ORDER BY lease_deadline LIMIT ?`;
const requeueExpiredLeases = `UPDATE jobs SET state = 'queued', attempt = attempt + 1, not_before = @notBefore,
    redispatch_at = @redispatchAt, lease_token = NULL, lease_holder = NULL, lease_deadline = NULL,
    progress = NULL, progress_message = NULL, updated_at = @now
  WHERE id IN (SELECT value FROM json_each(@ids)) AND +state = 'running' AND attempt = @attempt
    AND lease_deadline <= @now AND cancel_requested = 0`;
const closeExpiredAttempts = `UPDATE attempts SET ended_at = @now, outcome = 'expired', error = @error
  WHERE job_id IN (SELECT value FROM json_each(@ids)) AND attempt = @attempt AND ended_at IS NULL`;
const selectDueRedispatches = `SELECT id, attempt, tenant, type, not_before, dispatched_attempt FROM jobs INDEXED BY jobs_redispatch_due
  WHERE state = 'queued' AND redispatch_at <= ? ORDER BY redispatch_at LIMIT ?`;
const selectAbandonedGrants = `SELECT id, attempt, tenant, type FROM jobs INDEXED BY jobs_grant_unconfirmed
  WHERE state = 'running' AND grant_abandoned_at IS NOT NULL AND grant_abandoned_at <= ? AND cancel_requested = 0
  ORDER BY grant_abandoned_at LIMIT ?`;
const abandonGrants = `UPDATE jobs SET state = 'queued', redispatch_at = @redispatchAt, dispatched_attempt = NULL,
    lease_token = NULL, lease_holder = NULL, lease_proof = NULL, lease_deadline = NULL, grant_abandoned_at = NULL, updated_at = @now
  WHERE id IN (SELECT value FROM json_each(@ids)) AND +state = 'running' AND grant_abandoned_at <= @now AND cancel_requested = 0`;
const deleteOpenAttempts = 'DELETE FROM attempts WHERE job_id IN (SELECT value FROM json_each(?)) AND ended_at IS NULL';
const hasUnsentWork = `SELECT 1 FROM outbox WHERE job_id = ? AND kind = 'work' AND sent_at IS NULL LIMIT 1`;
const postponeRedispatch = `UPDATE jobs SET redispatch_at = ? WHERE id = ? AND state = 'queued' AND attempt = ?`;

const selectLogSummary = 'SELECT * FROM attempt_logs WHERE job_id = ? AND attempt = ?';
const upsertLogSummary = `INSERT INTO attempt_logs (job_id, attempt, head_bytes, head_closed, tail_bytes, dropped_bytes,
    dropped_lines, next_seq, updated_at)
  VALUES (@jobId, @attempt, @headBytes, @headClosed, @tailBytes, @droppedBytes, @droppedLines, @nextSeq, @now)
  ON CONFLICT (job_id, attempt) DO UPDATE SET head_bytes = excluded.head_bytes, head_closed = excluded.head_closed,
    tail_bytes = excluded.tail_bytes, dropped_bytes = excluded.dropped_bytes, dropped_lines = excluded.dropped_lines,
    next_seq = excluded.next_seq, updated_at = excluded.updated_at`;
const insertLogChunk = `INSERT INTO log_chunks (job_id, attempt, seq, section, bytes, line_count, lines)
  VALUES (@jobId, @attempt, @seq, @section, @bytes, @lineCount, @lines)`;
const selectOldestTailChunks = `SELECT seq, bytes, line_count FROM log_chunks
  WHERE job_id = @jobId AND attempt = @attempt AND section = 'tail' ORDER BY seq LIMIT @limit`;
const deleteTailChunks = `DELETE FROM log_chunks WHERE job_id = @jobId AND attempt = @attempt AND section = 'tail' AND seq <= @throughSeq`;
const selectLogChunks = `SELECT seq, section, bytes, lines FROM log_chunks
  WHERE job_id = @jobId AND attempt = @attempt AND seq > @afterSeq ORDER BY seq`;
// The dispatcher. A waiting job: queued, due, not released for its current attempt.
const waiting = `state = 'queued' AND not_before <= @now AND dispatched_attempt IS NOT attempt`;
const selectWaitingGroups = `SELECT type, tenant, COUNT(*) AS count FROM jobs WHERE ${waiting} GROUP BY type, tenant`;
// The first queued (type, tenant) pair, the next tenant of a type, the next type: each a seek
// in jobs_waiting. (A row value `(type, tenant) > (?, ?)` would not seek past the pair: SQLite
// reads it as type >= ? and steps over every job of the type.)
const firstQueuedGroup = `SELECT type, tenant FROM jobs INDEXED BY jobs_waiting WHERE state = 'queued' ORDER BY type, tenant LIMIT 1`;
const nextQueuedTenant = `SELECT type, tenant FROM jobs INDEXED BY jobs_waiting
  WHERE state = 'queued' AND type = @type AND tenant > @tenant ORDER BY tenant LIMIT 1`;
const nextQueuedType = `SELECT type, tenant FROM jobs INDEXED BY jobs_waiting
  WHERE state = 'queued' AND type > @type ORDER BY type, tenant LIMIT 1`;
const waitingColumns = 'id, tenant, type, attempt, priority, concurrency_key, concurrency_limit';
const selectWaitingJobs = `SELECT ${waitingColumns} FROM jobs
  WHERE type = @type AND tenant = @tenant AND ${waiting} ORDER BY priority DESC, seq LIMIT @limit`;
const selectWaitingJob = `SELECT ${waitingColumns}, state, not_before, dispatched_attempt FROM jobs WHERE id = ?`;
// Occupancy reads the live leases and the released jobs through their partial indexes, not
// every queued job (see the sweep's INDEXED BY above); markDispatched looks its jobs up by id.
const selectOccupancy = `SELECT tenant, type, concurrency_key, SUM(running) AS running, SUM(released) AS released FROM (
    SELECT tenant, type, concurrency_key, 1 AS running, 0 AS released FROM jobs INDEXED BY jobs_lease_due
      WHERE state = 'running' AND lease_deadline > @now
    UNION ALL
    SELECT tenant, type, concurrency_key, 0, 1 FROM jobs INDEXED BY jobs_dispatched WHERE state = 'queued' AND dispatched_attempt = attempt
  ) GROUP BY tenant, type, concurrency_key`;
const markDispatched = `UPDATE jobs SET dispatched_attempt = attempt, redispatch_at = @redispatchAt
  WHERE (id, attempt) IN (SELECT value ->> 0, value ->> 1 FROM json_each(@jobs)) AND +state = 'queued'`;
const selectTenantWeights = 'SELECT tenant, weight FROM tenant_weights ORDER BY tenant';
const selectRunningLimits = 'SELECT tenant, type, max_running FROM running_limits ORDER BY tenant, type';
const upsertTenantWeight = 'INSERT INTO tenant_weights (tenant, weight) VALUES (@tenant, @weight) ON CONFLICT (tenant) DO UPDATE SET weight = excluded.weight';
const deleteTenantWeight = 'DELETE FROM tenant_weights WHERE tenant = @tenant';
const upsertRunningLimit = `INSERT INTO running_limits (tenant, type, max_running) VALUES (@tenant, @type, @maxRunning)
  ON CONFLICT (tenant, type) DO UPDATE SET max_running = excluded.max_running`;
const deleteRunningLimit = 'DELETE FROM running_limits WHERE tenant = @tenant AND type = @type';

type WaitingRow = Pick<JobRow, 'id' | 'tenant' | 'type' | 'attempt' | 'priority' | 'concurrency_key' | 'concurrency_limit'>;
function toWaitingJob(r: WaitingRow): WaitingJob {
  return {
    id: r.id,
    tenant: r.tenant,
    type: r.type,
    attempt: r.attempt,
    priority: r.priority,
    concurrencyKey: r.concurrency_key,
    concurrencyLimit: r.concurrency_limit,
  };
}

const upsertUploadGrant = `INSERT INTO upload_grants (job_id, attempt, signed_at, valid_until) VALUES (@jobId, @attempt, @now, @validUntil)
  ON CONFLICT (job_id, attempt) DO UPDATE SET valid_until = MAX(valid_until, excluded.valid_until)`;
const selectDecidedUploadGrants = `SELECT g.job_id, g.attempt, j.tenant, j.state, j.attempt AS job_attempt
  FROM upload_grants g JOIN jobs j ON j.id = g.job_id
  WHERE g.closed_at IS NULL AND g.valid_until <= @validBefore AND (g.claimed_until IS NULL OR g.claimed_until <= @now)
    AND (j.state IN ('finished', 'failed') OR g.attempt < j.attempt)
  ORDER BY g.valid_until LIMIT @limit`;
// A set of (job, attempt) pairs, handed over as the JSON text of [[job, attempt], ...].
const attemptSet = `(job_id, attempt) IN (SELECT value ->> 0, value ->> 1 FROM json_each(@attempts))`;
const claimUploadGrants = `UPDATE upload_grants SET claimed_until = @claimedUntil WHERE closed_at IS NULL AND ${attemptSet}`;
const closeUploadGrants = `UPDATE upload_grants SET closed_at = @now, outcome = @outcome WHERE closed_at IS NULL AND ${attemptSet}`;

const selectActiveJobCounts = `SELECT state, type, tenant, COUNT(*) AS count,
    MIN(CASE WHEN state = 'queued' AND not_before <= @now THEN not_before END) AS oldest
  FROM jobs WHERE state IN ('queued', 'running') GROUP BY state, type, tenant`;

const selectRetryLinks = `SELECT (SELECT job_id FROM job_retries WHERE retry_id = @jobId) AS retry_of,
    (SELECT retry_id FROM job_retries WHERE job_id = @jobId) AS retried_by`;
const insertRetryLink = 'INSERT INTO job_retries (job_id, retry_id, created_at) VALUES (@jobId, @retryId, @now)';
// Unretried failed jobs (statements.ts), narrowed by a NullableFilter.
const unretriedFailed = `j.state = 'failed' AND j.failure_reason <> 'cancelled'
    AND NOT EXISTS (SELECT 1 FROM job_retries r WHERE r.job_id = j.id)
    AND (@tenant IS NULL OR j.tenant = @tenant) AND (@type IS NULL OR j.type = @type)
    AND (@code IS NULL OR j.error_code = @code)
    AND (@endedAfter IS NULL OR j.ended_at >= @endedAfter) AND (@endedBefore IS NULL OR j.ended_at < @endedBefore)`;
const selectRetryCandidates = `SELECT j.* FROM jobs j WHERE ${unretriedFailed} ORDER BY j.ended_at, j.seq LIMIT @limit`;
const selectFailureGroups = `SELECT j.type, COALESCE(j.error_code, '') AS code, COUNT(*) AS count,
    MIN(j.ended_at) AS first_ended_at, MAX(j.ended_at) AS last_ended_at, MAX(j.id) AS sample_job_id
  FROM jobs j WHERE ${unretriedFailed}
  GROUP BY j.type, COALESCE(j.error_code, '') ORDER BY count DESC, j.type, code`;

const selectPrunableJobs = `SELECT j.id, j.tenant, j.state, j.attempt, j.result FROM jobs j
  WHERE j.ended_at IS NOT NULL AND j.ended_at <= @endedBefore
    AND (@ids IS NULL OR j.id IN (SELECT value FROM json_each(@ids)))
    AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.job_id = j.id AND o.sent_at IS NULL)
    AND NOT EXISTS (SELECT 1 FROM upload_grants g WHERE g.job_id = j.id AND g.closed_at IS NULL)
  ORDER BY j.ended_at LIMIT @limit`;
const deleteJobRows = [...jobOwnedRows, { table: 'jobs', column: 'id' }].map(
  ({ table, column }) => `DELETE FROM ${table} WHERE ${column} IN (SELECT value FROM json_each(?))`,
);

/**
 * The queries whose plan decides whether a pass of the sweep or the dispatcher costs what
 * is due or every job, each with the index it must be answered through (the query-plan
 * test holds them to it: a new index or a rewrite that lets the planner fall back on
 * jobs_state_listing fails there, not at a million jobs).
 */
export const indexedQueries: ReadonlyArray<{ name: string; sql: string; index: string }> = [
  { name: 'selectExpiredLeases', sql: selectExpiredLeases, index: 'jobs_lease_due' },
  { name: 'selectAbandonedGrants', sql: selectAbandonedGrants, index: 'jobs_grant_unconfirmed' },
  { name: 'selectDueRedispatches', sql: selectDueRedispatches, index: 'jobs_redispatch_due' },
  { name: 'requeueExpiredLeases', sql: requeueExpiredLeases, index: 'sqlite_autoindex_jobs_1' },
  { name: 'abandonGrants', sql: abandonGrants, index: 'sqlite_autoindex_jobs_1' },
  { name: 'markDispatched', sql: markDispatched, index: 'sqlite_autoindex_jobs_1' },
  { name: 'selectOccupancy', sql: selectOccupancy, index: 'jobs_dispatched' },
  { name: 'firstQueuedGroup', sql: firstQueuedGroup, index: 'jobs_waiting' },
  { name: 'nextQueuedTenant', sql: nextQueuedTenant, index: 'jobs_waiting' },
  { name: 'nextQueuedType', sql: nextQueuedType, index: 'jobs_waiting' },
];

export class SqliteStatements implements LedgerStatements {
  constructor(private readonly ctx: SqliteContext) {}

  /** The one row `sql` answers (a SELECT, or a change RETURNING *), as a Job. */
  private job(sql: string, params: object | string): Job | undefined {
    const row = this.ctx.sql(sql).get(params) as JobRow | undefined;
    return row && toJob(row);
  }

  selectJob({ jobId }: Params<'selectJob'>): Job | undefined {
    return this.job(selectJobById, jobId);
  }

  lockJob({ jobId }: Params<'lockJob'>): Job | undefined {
    // One writer at a time: the row cannot change before this write ends.
    return this.job(selectJobById, jobId);
  }

  selectJobByKey({ tenant, idempotencyKey }: Params<'selectJobByKey'>): Job | undefined {
    const row = this.ctx.sql(selectJobByKey).get(tenant, idempotencyKey) as JobRow | undefined;
    return row && toJob(row);
  }

  lockIdempotencyKeys(): void {
    // One writer at a time: no other transaction can insert a key before this one ends.
  }

  insertJob({ id, submission, now, redispatchAt, dispatch, dispatchedAttempt }: Params<'insertJob'>): boolean {
    return this.ctx.sql(insertJob).run({ ...submission, ...dispatch, id, now, redispatchAt, dispatchedAttempt }).changes === 1;
  }

  grantLease(params: Params<'grantLease'>): Job | undefined {
    return this.job(grantLease, params);
  }

  regrantLease(params: Params<'regrantLease'>): Job | undefined {
    return this.job(regrantLease, params);
  }

  insertAttempt(params: Params<'insertAttempt'>): void {
    this.ctx.sql(insertAttempt).run(params);
  }

  extendLease(params: Params<'extendLease'>): boolean {
    return this.ctx.sql(extendLease).run(params).changes === 1;
  }

  updateProgress(params: Params<'updateProgress'>): boolean {
    return this.ctx.sql(updateProgress).run(params).changes === 1;
  }

  finishAttempt(p: Params<'finishAttempt'>): boolean {
    return this.ctx.sql(finishAttempt).run({ ...guard(p), result: p.result }).changes === 1;
  }

  failAttempt(p: Params<'failAttempt'>): boolean {
    const { error } = p;
    return (
      this.ctx.sql(failAttempt).run({
        ...guard(p),
        reason: p.reason,
        errorClass: error.class,
        errorCode: error.code,
        errorMessage: error.message,
        errorLogTail: error.logTail ?? null,
      }).changes === 1
    );
  }

  requeueAttempt(p: Params<'requeueAttempt'>): boolean {
    return this.ctx.sql(requeueAttempt).run({ ...guard(p), notBefore: p.notBefore, redispatchAt: p.redispatchAt }).changes === 1;
  }

  closeAttempt(p: Params<'closeAttempt'>): void {
    this.ctx.sql(closeAttempt).run(p);
  }

  insertOutbox(p: Params<'insertOutbox'>): void {
    this.ctx.sql(insertOutbox).run(p.kind, p.jobId, p.body, p.now, p.availableAt);
  }

  insertWorkMessages({ messages, now, availableAt }: Params<'insertWorkMessages'>): void {
    // One prepared INSERT per row: no round trips here, and no statement to build per batch.
    const insert = this.ctx.sql(insertOutbox);
    for (const { jobId, body } of messages) insert.run('work', jobId, body, now, availableAt);
  }

  failQueuedJob({ jobId, attempt, reason, error, now }: Params<'failQueuedJob'>): Job | undefined {
    return this.job(failQueuedJob, { jobId, attempt, reason, errorClass: error.class, errorCode: error.code, errorMessage: error.message, now });
  }

  requestCancel(params: Params<'requestCancel'>): Job | undefined {
    return this.job(requestCancel, params);
  }

  withdrawWork(params: Params<'withdrawWork'>): void {
    this.ctx.sql(withdrawWork).run(params);
  }

  setAsideOutboxRow(params: Params<'setAsideOutboxRow'>): OutboxRowRef | undefined {
    const row = this.ctx.sql(setAsideOutboxRow).get(params) as { kind: OutboxKind; job_id: string; body: string } | undefined;
    return row && ({ kind: row.kind, jobId: row.job_id, body: JSON.parse(row.body) as unknown } as OutboxRowRef);
  }

  selectDueOutbox({ now, limit }: Params<'selectDueOutbox'>): OutboxMessage[] {
    return (this.ctx.sql(selectDueOutbox).all(now, limit) as OutboxRow[]).map(toOutboxMessage);
  }

  selectClaimableOutbox(params: Params<'selectClaimableOutbox'>): OutboxMessage[] {
    return (this.ctx.sql(selectClaimableOutbox).all(params) as OutboxRow[]).map(toOutboxMessage);
  }

  claimOutboxRows({ ids, claimedUntil }: Params<'claimOutboxRows'>): void {
    this.ctx.sql(claimOutboxRows).run({ ids: JSON.stringify(ids), claimedUntil });
  }

  markOutboxSent({ ids, now }: Params<'markOutboxSent'>): void {
    const statement = this.ctx.sql(markOutboxSent);
    for (const id of ids) statement.run(now, id);
  }

  selectOutboxStats({ now }: Params<'selectOutboxStats'>): OutboxStats {
    const row = this.ctx.sql(selectOutboxStats).get(now) as { unsent: number; oldest: number | null };
    return { unsent: row.unsent, oldestCreatedAt: row.oldest };
  }

  upsertFleetMember({ report, proof, now, freeBefore }: Params<'upsertFleetMember'>): boolean {
    const row = this.ctx.sql(upsertFleetMember).get({
      worker: report.worker,
      proof,
      jobTypes: JSON.stringify(report.jobTypes),
      capabilities: JSON.stringify(report.capabilities),
      heldBack: JSON.stringify(report.heldBack),
      slots: report.slots,
      running: report.running,
      now,
      freeBefore,
    });
    return row !== undefined;
  }

  selectFleet({ heardSince }: Params<'selectFleet'>): FleetRecord[] {
    return (this.ctx.sql(selectFleet).all(heardSince) as FleetRow[]).map(toFleetRecord);
  }

  insertApiKey({ key }: Params<'insertApiKey'>): void {
    this.ctx.sql(insertApiKey).run(...apiKeyValues(key));
  }

  insertApiKeyUnlessKnown({ key }: Params<'insertApiKeyUnlessKnown'>): boolean {
    return this.ctx.sql(insertApiKeyUnlessKnown).get(...apiKeyValues(key)) !== undefined;
  }

  selectWorkingApiKey({ keySha256 }: Params<'selectWorkingApiKey'>): KeyIdentity | undefined {
    const row = this.ctx.sql(selectWorkingApiKey).get(keySha256) as ApiKeyRow | undefined;
    return row && toKeyIdentity(row);
  }

  selectApiKey({ id }: Params<'selectApiKey'>): ApiKeyRecord | undefined {
    const row = this.ctx.sql(selectApiKey).get(id) as ApiKeyRow | undefined;
    return row && toApiKeyRecord(row);
  }

  selectApiKeys(): ApiKeyRecord[] {
    return (this.ctx.sql(selectApiKeys).all() as ApiKeyRow[]).map(toApiKeyRecord);
  }

  revokeApiKey({ id, now }: Params<'revokeApiKey'>): boolean {
    return this.ctx.sql(revokeApiKey).run(now, id).changes === 1;
  }

  touchApiKey({ id, now }: Params<'touchApiKey'>): void {
    this.ctx.sql(touchApiKey).run({ id, now });
  }

  selectAttempts({ jobId }: Params<'selectAttempts'>): AttemptRecord[] {
    return (this.ctx.sql(selectAttempts).all(jobId) as AttemptRow[]).map(toAttempt);
  }

  selectJobPage(params: Params<'selectJobPage'>): Array<{ seq: number; job: Job }> {
    return (this.ctx.sql(selectJobPage).all(params) as JobRow[]).map((row) => ({ seq: row.seq, job: toJob(row) }));
  }

  countJobsByState(): Array<{ state: JobState; count: number }> {
    return this.ctx.sql(countJobsByState).all() as Array<{ state: JobState; count: number }>;
  }

  selectActiveJobCounts({ now }: Params<'selectActiveJobCounts'>): ActiveJobCount[] {
    const rows = this.ctx.sql(selectActiveJobCounts).all({ now }) as Array<
      Pick<JobRow, 'type' | 'tenant'> & {
        state: ActiveJobCount['state'];
        count: number;
        oldest: number | null;
      }
    >;
    return rows.map((r) => ({ state: r.state, type: r.type, tenant: r.tenant, count: r.count, oldestDueSince: r.oldest }));
  }

  selectRetryLinks({ jobId }: Params<'selectRetryLinks'>): RetryLinks {
    const row = this.ctx.sql(selectRetryLinks).get({ jobId }) as { retry_of: string | null; retried_by: string | null };
    return { retryOf: row.retry_of, retriedBy: row.retried_by };
  }

  insertRetryLink(params: Params<'insertRetryLink'>): void {
    this.ctx.sql(insertRetryLink).run(params);
  }

  selectRetryCandidates({ filter, limit }: Params<'selectRetryCandidates'>): Job[] {
    return (this.ctx.sql(selectRetryCandidates).all({ ...filter, limit }) as JobRow[]).map(toJob);
  }

  selectFailureGroups({ filter }: Params<'selectFailureGroups'>): FailureGroup[] {
    const rows = this.ctx.sql(selectFailureGroups).all(filter) as Array<{
      type: string;
      code: string;
      count: number;
      first_ended_at: number;
      last_ended_at: number;
      sample_job_id: string;
    }>;
    return rows.map((r) => ({
      type: r.type,
      code: r.code,
      count: r.count,
      firstEndedAt: r.first_ended_at,
      lastEndedAt: r.last_ended_at,
      sampleJobId: r.sample_job_id,
    }));
  }

  selectPrunableJobs({ endedBefore, limit, jobIds }: Params<'selectPrunableJobs'>): PrunableJob[] {
    const rows = this.ctx.sql(selectPrunableJobs).all({ endedBefore, limit, ids: jobIds === null ? null : JSON.stringify(jobIds) }) as Array<
      Pick<JobRow, 'id' | 'tenant' | 'state' | 'attempt' | 'result'>
    >;
    return rows.map((r) => ({
      id: r.id,
      tenant: r.tenant,
      state: r.state,
      attempt: r.attempt,
      result: r.result === null ? null : (JSON.parse(r.result) as JobResult),
    }));
  }

  deleteJobs({ jobIds }: Params<'deleteJobs'>): number {
    const ids = JSON.stringify(jobIds);
    let jobs = 0;
    // One writer at a time: the rows of the jobs cannot change between these deletes.
    for (const sql of deleteJobRows) jobs = this.ctx.sql(sql).run(ids).changes;
    return jobs;
  }

  selectExpiredLeases({ now, limit }: Params<'selectExpiredLeases'>): ExpiredLease[] {
    const rows = this.ctx.sql(selectExpiredLeases).all(now, limit) as Array<
      Pick<JobRow, 'id' | 'attempt' | 'max_attempts' | 'cancel_requested' | 'tenant' | 'type'>
    >;
    return rows.map((r) => ({
      id: r.id,
      attempt: r.attempt,
      maxAttempts: r.max_attempts,
      cancelRequested: r.cancel_requested === 1,
      tenant: r.tenant,
      type: r.type,
    }));
  }

  requeueExpiredLeases(p: Params<'requeueExpiredLeases'>): number {
    const { attempt, now, notBefore, redispatchAt } = p;
    return this.ctx.sql(requeueExpiredLeases).run({ ids: JSON.stringify(p.jobIds), attempt, now, notBefore, redispatchAt }).changes;
  }

  closeExpiredAttempts(p: Params<'closeExpiredAttempts'>): void {
    this.ctx.sql(closeExpiredAttempts).run({ ids: JSON.stringify(p.jobIds), attempt: p.attempt, now: p.now, error: p.error });
  }

  selectAbandonedGrants({ now, limit }: Params<'selectAbandonedGrants'>): AbandonedGrant[] {
    return this.ctx.sql(selectAbandonedGrants).all(now, limit) as AbandonedGrant[];
  }

  abandonGrants({ jobIds, now, redispatchAt }: Params<'abandonGrants'>): number {
    return this.ctx.sql(abandonGrants).run({ ids: JSON.stringify(jobIds), now, redispatchAt }).changes;
  }

  deleteOpenAttempts({ jobIds }: Params<'deleteOpenAttempts'>): void {
    this.ctx.sql(deleteOpenAttempts).run(JSON.stringify(jobIds));
  }

  selectDueRedispatches({ now, limit }: Params<'selectDueRedispatches'>): DueRedispatch[] {
    const rows = this.ctx.sql(selectDueRedispatches).all(now, limit) as Array<
      Pick<JobRow, 'id' | 'attempt' | 'tenant' | 'type' | 'not_before' | 'dispatched_attempt'>
    >;
    return rows.map((r) => ({
      id: r.id,
      attempt: r.attempt,
      tenant: r.tenant,
      type: r.type,
      notBefore: r.not_before,
      dispatchedAttempt: r.dispatched_attempt,
    }));
  }

  hasUnsentWork({ jobId }: Params<'hasUnsentWork'>): boolean {
    return this.ctx.sql(hasUnsentWork).get(jobId) !== undefined;
  }

  postponeRedispatch({ jobId, attempt, redispatchAt }: Params<'postponeRedispatch'>): void {
    this.ctx.sql(postponeRedispatch).run(redispatchAt, jobId, attempt);
  }

  lockDispatch(): void {
    // One writer at a time: no other dispatch can count before this one ends.
  }

  selectWaitingGroups(p: Params<'selectWaitingGroups'>): WaitingGroup[] {
    return this.ctx.sql(selectWaitingGroups).all(p) as WaitingGroup[];
  }

  selectQueuedGroups(): Array<{ type: string; tenant: string }> {
    type Group = { type: string; tenant: string };
    const groups: Group[] = [];
    const next = (after: Group) => (this.ctx.sql(nextQueuedTenant).get(after) ?? this.ctx.sql(nextQueuedType).get(after)) as Group | undefined;
    for (let group = this.ctx.sql(firstQueuedGroup).get() as Group | undefined; group; group = next(group)) groups.push(group);
    return groups;
  }

  selectWaitingJobs(p: Params<'selectWaitingJobs'>): WaitingJob[] {
    return (this.ctx.sql(selectWaitingJobs).all(p) as WaitingRow[]).map(toWaitingJob);
  }

  selectWaitingJob({ jobId }: Params<'selectWaitingJob'>): ReturnType<LedgerStatements['selectWaitingJob']> {
    const row = this.ctx.sql(selectWaitingJob).get(jobId) as (WaitingRow & Pick<JobRow, 'state' | 'not_before' | 'dispatched_attempt'>) | undefined;
    return row && { ...toWaitingJob(row), state: row.state, notBefore: row.not_before, dispatchedAttempt: row.dispatched_attempt };
  }

  selectOccupancy(p: Params<'selectOccupancy'>): Occupancy[] {
    const rows = this.ctx.sql(selectOccupancy).all(p) as Array<Pick<JobRow, 'tenant' | 'type' | 'concurrency_key'> & { running: number; released: number }>;
    return rows.map((r) => ({ tenant: r.tenant, type: r.type, concurrencyKey: r.concurrency_key, running: r.running, released: r.released }));
  }

  markDispatched({ jobs, redispatchAt }: Params<'markDispatched'>): number {
    return this.ctx.sql(markDispatched).run({ jobs: JSON.stringify(jobs.map((j) => [j.jobId, j.attempt])), redispatchAt }).changes;
  }

  selectTenantWeights(): Array<{ tenant: string; weight: number }> {
    return this.ctx.sql(selectTenantWeights).all() as Array<{ tenant: string; weight: number }>;
  }

  selectRunningLimits(): RunningLimit[] {
    const rows = this.ctx.sql(selectRunningLimits).all() as Array<{ tenant: string; type: string; max_running: number }>;
    return rows.map((r) => ({ tenant: r.tenant, type: r.type, maxRunning: r.max_running }));
  }

  setTenantWeight({ tenant, weight }: Params<'setTenantWeight'>): void {
    if (weight === null) this.ctx.sql(deleteTenantWeight).run({ tenant });
    else this.ctx.sql(upsertTenantWeight).run({ tenant, weight });
  }

  setRunningLimit({ tenant, type, maxRunning }: Params<'setRunningLimit'>): void {
    if (maxRunning === null) this.ctx.sql(deleteRunningLimit).run({ tenant, type });
    else this.ctx.sql(upsertRunningLimit).run({ tenant, type, maxRunning });
  }

  upsertUploadGrant(p: Params<'upsertUploadGrant'>): void {
    this.ctx.sql(upsertUploadGrant).run(p);
  }

  selectDecidedUploadGrants(p: Params<'selectDecidedUploadGrants'>): DecidedUploadGrant[] {
    const rows = this.ctx.sql(selectDecidedUploadGrants).all(p) as Array<{
      job_id: string;
      attempt: number;
      tenant: string;
      state: JobState;
      job_attempt: number;
    }>;
    return rows.map((r) => ({ jobId: r.job_id, attempt: r.attempt, tenant: r.tenant, jobState: r.state, jobAttempt: r.job_attempt }));
  }

  claimUploadGrants({ attempts, claimedUntil }: Params<'claimUploadGrants'>): void {
    this.ctx.sql(claimUploadGrants).run({ attempts: attemptsJson(attempts), claimedUntil });
  }

  closeUploadGrants({ attempts, now, outcome }: Params<'closeUploadGrants'>): void {
    this.ctx.sql(closeUploadGrants).run({ attempts: attemptsJson(attempts), now, outcome });
  }

  selectLogSummary({ jobId, attempt }: Params<'selectLogSummary'>): LogSummary | undefined {
    const row = this.ctx.sql(selectLogSummary).get(jobId, attempt) as LogSummaryRow | undefined;
    return (
      row && {
        jobId: row.job_id,
        attempt: row.attempt,
        headBytes: row.head_bytes,
        headClosed: row.head_closed === 1,
        tailBytes: row.tail_bytes,
        droppedBytes: row.dropped_bytes,
        droppedLines: row.dropped_lines,
        nextSeq: row.next_seq,
      }
    );
  }

  upsertLogSummary(p: Params<'upsertLogSummary'>): void {
    this.ctx.sql(upsertLogSummary).run({ ...p, headClosed: p.headClosed ? 1 : 0 });
  }

  insertLogChunk(p: Params<'insertLogChunk'>): void {
    this.ctx.sql(insertLogChunk).run(p);
  }

  selectOldestTailChunks(p: Params<'selectOldestTailChunks'>): Array<{ seq: number; bytes: number; lineCount: number }> {
    const rows = this.ctx.sql(selectOldestTailChunks).all(p) as Array<{ seq: number; bytes: number; line_count: number }>;
    return rows.map((r) => ({ seq: r.seq, bytes: r.bytes, lineCount: r.line_count }));
  }

  deleteTailChunks(p: Params<'deleteTailChunks'>): void {
    this.ctx.sql(deleteTailChunks).run(p);
  }

  selectLogChunks(p: Params<'selectLogChunks'>): LogChunk[] {
    const rows = this.ctx.sql(selectLogChunks).all(p) as Array<{ seq: number; section: LogSection; bytes: number; lines: string }>;
    return rows.map((r) => ({ seq: r.seq, section: r.section, bytes: r.bytes, lines: JSON.parse(r.lines) as LogEntry[] }));
  }
}

interface LogSummaryRow {
  job_id: string;
  attempt: number;
  head_bytes: number;
  head_closed: number;
  tail_bytes: number;
  dropped_bytes: number;
  dropped_lines: number;
  next_seq: number;
}

function attemptsJson(attempts: readonly AttemptKey[]): string {
  return JSON.stringify(attempts.map(({ jobId, attempt }) => [jobId, attempt]));
}

/** An AttemptGuard as SQLite binds it (no booleans). */
function guard(p: AttemptGuard) {
  return { jobId: p.jobId, attempt: p.attempt, token: p.token, cancelRequested: p.cancelRequested ? 1 : 0, expect: p.expect, now: p.now };
}
