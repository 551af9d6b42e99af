/**
 * The ledger's named statements (operations/statements.ts says what each must do) in
 * PostgreSQL's dialect, each one round trip on the write's connection (or the pool, for
 * a read). Several orchestrators may share the database: a plan that decides from a row
 * reads it with lockJob (FOR UPDATE), and every change is still a guarded UPDATE whose
 * row count or RETURNING row decides.
 */
import type {
  ActiveJobCount,
  ApiKeyRecord,
  AttemptKey,
  AttemptRecord,
  FailureGroup,
  FleetRecord,
  Job,
  KeyIdentity,
  OutboxKind,
  OutboxMessage,
  OutboxStats,
  PrunableJob,
  RetryLinks,
  RunningLimit,
} from '../ledger.js';
import type { AsyncLedgerStatements, StatementParams as Params } from '../operations/plan.js';
import type {
  AttemptGuard,
  DecidedUploadGrant,
  DueRedispatch,
  ExpiredLease,
  AbandonedGrant,
  LeaseExpectation,
  LedgerStatements,
  LogChunk,
  LogSection,
  LogSummary,
  NullableFilter,
  Occupancy,
  OutboxRowRef,
  WaitingGroup,
  WaitingJob,
} from '../operations/statements.js';
import type { LogEntry } from '../../wire/logs.js';
import { jobOwnedRows } from '../shared/job-owned-rows.js';
import type { JobState } from '../states.js';
import { apiKeyColumns, apiKeyValues, type ApiKeyRow, toApiKeyRecord, toKeyIdentity } from '../shared/api-key-rows.js';
import type { PgContext } from './context.js';
import {
  type AttemptRow,
  type FleetRow,
  type JobRow,
  lockJobById,
  type OutboxRow,
  selectJobById,
  toAttempt,
  toFleetRecord,
  toJob,
  toOutboxMessage,
} from './rows.js';

const selectJobByKey = 'SELECT * FROM jobs WHERE tenant = $1 AND idempotency_key = $2';
// Per (tenant, key), taken in one order by every batch: two batches naming the same keys in
// opposite orders would otherwise each insert one and wait for the other's (a deadlock that
// PostgreSQL breaks only after deadlock_timeout). Hash collisions merely serialise more.
const lockKeys = `SELECT pg_advisory_xact_lock($1, h)
  FROM (SELECT DISTINCT hashtext(k) AS h FROM unnest($2::text[]) AS k) AS keys ORDER BY h`;
const SUBMIT_LOCK_CLASS = 0x706c_6b79; // 'plky'
const insertJob = `INSERT INTO jobs (id, tenant, type, input, requires, idempotency_key, state, attempt, max_attempts,
    not_before, redispatch_at, created_at, updated_at, timeout_seconds, priority, concurrency_key, concurrency_limit, dispatched_attempt, limits)
  VALUES ($1, $2, $3, $4, $5, $6, 'queued', 1, $7, $11, $9, $8, $8, $10, $12, $13, $14, $15, $16)
  ON CONFLICT (tenant, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING`;

const grantLease = `UPDATE jobs SET state = 'running', lease_token = $4, lease_holder = $3, lease_proof = $7,
    lease_deadline = $5, redispatch_at = NULL, started_at = COALESCE(started_at, $6), updated_at = $6, grant_abandoned_at = $8
  WHERE id = $1 AND state = 'queued' AND attempt = $2 AND not_before <= $6 AND ($9::text IS NULL OR tenant = $9)
  RETURNING *`;
const regrantLease = `UPDATE jobs SET lease_deadline = $4, updated_at = $5,
    grant_abandoned_at = CASE WHEN grant_abandoned_at IS NULL THEN NULL ELSE $7::bigint END
  WHERE id = $1 AND state = 'running' AND attempt = $2 AND lease_holder = $3
    AND lease_proof = $6 AND lease_deadline > $5 AND NOT cancel_requested AND ($8::text IS NULL OR tenant = $8)
  RETURNING *`;
const insertAttempt = 'INSERT INTO attempts (job_id, attempt, worker, started_at) VALUES ($1, $2, $3, $4)';

// $1 job, $2 attempt, $3 token, $4 now: the live, uncancelled lease.
const liveLease = `id = $1 AND state = 'running' AND attempt = $2 AND lease_token = $3
    AND lease_deadline > $4 AND NOT cancel_requested`;

const extendLease = `UPDATE jobs SET lease_deadline = $5, grant_abandoned_at = NULL, updated_at = $4 WHERE ${liveLease}`;
const updateProgress = `UPDATE jobs SET progress = $5, progress_message = $6, grant_abandoned_at = NULL, updated_at = $4 WHERE ${liveLease}`;

// AttemptGuard, the exits from running@n: $1 job, $2 attempt, $3 token, $4 now, $5 cancel_requested
// as decided on; one statement per expectation, so that each has a plain plan.
const attemptGuard = (expect: LeaseExpectation) =>
  `id = $1 AND state = 'running' AND attempt = $2 AND lease_token = $3 AND cancel_requested = $5
    AND lease_deadline ${expect === 'live' ? '>' : '<='} $4`;
const finishAttempt = (expect: LeaseExpectation) => `UPDATE jobs SET state = 'finished', result = $6, lease_token = NULL,
    lease_deadline = NULL, progress = 1, ended_at = $4, updated_at = $4
  WHERE ${attemptGuard(expect)}`;
const failAttempt = (expect: LeaseExpectation) => `UPDATE jobs SET state = 'failed', failure_reason = $6, error_class = $7,
    error_code = $8, error_message = $9, error_log_tail = $10, lease_token = NULL, lease_deadline = NULL, ended_at = $4, updated_at = $4
  WHERE ${attemptGuard(expect)}`;
const requeueAttempt = (expect: LeaseExpectation) => `UPDATE jobs SET state = 'queued', attempt = attempt + 1, not_before = $6,
    redispatch_at = $7, lease_token = NULL, lease_holder = NULL, lease_deadline = NULL,
    progress = NULL, progress_message = NULL, updated_at = $4
  WHERE ${attemptGuard(expect)}`;
const exits = {
  live: { finish: finishAttempt('live'), fail: failAttempt('live'), requeue: requeueAttempt('live') },
  expired: { finish: finishAttempt('expired'), fail: failAttempt('expired'), requeue: requeueAttempt('expired') },
};
const closeAttempt = `UPDATE attempts SET ended_at = $3, outcome = $4, error = $5
  WHERE job_id = $1 AND attempt = $2 AND ended_at IS NULL`;

const insertOutbox = 'INSERT INTO outbox (kind, job_id, body, created_at, available_at) VALUES ($1, $2, $3, $4, $5)';
const insertWorkMessages = `INSERT INTO outbox (kind, job_id, body, created_at, available_at)
  SELECT 'work', u.job_id, u.body::json, $3, $4 FROM unnest($1::text[], $2::text[]) AS u(job_id, body)`;

const failQueuedJob = `UPDATE jobs SET state = 'failed', failure_reason = $3, error_class = $4,
    error_code = $5, error_message = $6, redispatch_at = NULL, ended_at = $7, updated_at = $7
  WHERE id = $1 AND state = 'queued' AND ($2::integer IS NULL OR attempt = $2)
  RETURNING *`;
const requestCancel = `UPDATE jobs SET cancel_requested = true, updated_at = $2 WHERE id = $1 AND state = 'running'
  RETURNING *`;
const withdrawWork = `UPDATE outbox SET sent_at = $2, set_aside_reason = $3
  WHERE job_id = $1 AND kind = 'work' AND sent_at IS NULL`;
const setAsideOutboxRow = `UPDATE outbox SET sent_at = $2, set_aside_reason = $3 WHERE id = $1 AND sent_at IS NULL
  RETURNING kind, job_id, body`;

// Walks the unsent rows in id order (a partial index) and skips the few not yet due.
const selectDueOutbox = `SELECT id, kind, job_id, body, created_at, available_at FROM outbox
  WHERE sent_at IS NULL AND available_at <= $1 ORDER BY id LIMIT $2`;
// As selectDueOutbox; rows another relay is claiming right now are skipped, not waited for.
const selectClaimableOutbox = `SELECT id, kind, job_id, body, created_at, available_at FROM outbox
  WHERE sent_at IS NULL AND available_at <= $1 AND (claimed_until IS NULL OR claimed_until <= $1)
  ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED`;
const claimOutboxRows = 'UPDATE outbox SET claimed_until = $2 WHERE id = ANY($1::bigint[]) AND sent_at IS NULL';
const markOutboxSent = 'UPDATE outbox SET sent_at = $1 WHERE id = ANY($2::bigint[]) AND sent_at IS NULL';
const selectOutboxStats = 'SELECT COUNT(*) AS unsent, MIN(created_at) AS oldest FROM outbox WHERE sent_at IS NULL AND available_at <= $1';

// A name held by another proof that was heard from lately keeps its row: the guard of the DO UPDATE.
const upsertFleetMember = `INSERT INTO fleet (worker, proof, job_types, capabilities, held_back, slots, running, last_heartbeat)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
  ON CONFLICT (worker) DO UPDATE SET proof = EXCLUDED.proof, job_types = EXCLUDED.job_types,
    capabilities = EXCLUDED.capabilities, held_back = EXCLUDED.held_back, slots = EXCLUDED.slots,
    running = EXCLUDED.running, last_heartbeat = EXCLUDED.last_heartbeat
  WHERE fleet.proof = EXCLUDED.proof OR fleet.last_heartbeat < $9
  RETURNING worker`;
const selectFleet = 'SELECT * FROM fleet WHERE last_heartbeat >= $1 ORDER BY worker';

const insertApiKey = `INSERT INTO api_keys (id, kind, tenant, key_sha256, prefix, created_at, last_used_at, revoked_at)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`;
const insertApiKeyUnlessKnown = `${insertApiKey} ON CONFLICT DO NOTHING RETURNING id`;
const selectWorkingApiKey = 'SELECT id, kind, tenant FROM api_keys WHERE key_sha256 = $1 AND revoked_at IS NULL';
const selectApiKey = `SELECT ${apiKeyColumns} FROM api_keys WHERE id = $1`;
const selectApiKeys = `SELECT ${apiKeyColumns} FROM api_keys ORDER BY created_at, id`;
const revokeApiKey = 'UPDATE api_keys SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL';
const touchApiKey = 'UPDATE api_keys SET last_used_at = $2 WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $2)';

const selectAttempts = 'SELECT * FROM attempts WHERE job_id = $1 ORDER BY attempt';
const countJobsByState = 'SELECT state, COUNT(*) AS count FROM jobs GROUP BY state';

// The sweep. Due rows are read FOR UPDATE SKIP LOCKED; expired leases with the columns the
// expiry needs (a pass may read 10,000 rows, and most only go back to the queue). Sets of
// jobs are arrays, one statement per set.
const selectExpiredLeases = `SELECT id, attempt, max_attempts, cancel_requested, tenant, type FROM jobs
  WHERE state = 'running' AND lease_deadline <= $1
  ORDER BY lease_deadline LIMIT $2 FOR UPDATE SKIP LOCKED`;
const requeueExpiredLeases = `UPDATE jobs SET state = 'queued', attempt = attempt + 1, not_before = $3,
    redispatch_at = $4, lease_token = NULL, lease_holder = NULL, lease_deadline = NULL,
    progress = NULL, progress_message = NULL, updated_at = $5
  WHERE id = ANY($1::text[]) AND state = 'running' AND attempt = $2 AND lease_deadline <= $5 AND NOT cancel_requested`;
const closeExpiredAttempts = `UPDATE attempts SET ended_at = $3, outcome = 'expired', error = $4
  WHERE job_id = ANY($1::text[]) AND attempt = $2 AND ended_at IS NULL`;
const selectDueRedispatches = `SELECT id, attempt, tenant, type, not_before, dispatched_attempt FROM jobs
  WHERE state = 'queued' AND redispatch_at <= $1
  ORDER BY redispatch_at LIMIT $2 FOR UPDATE SKIP LOCKED`;
const selectAbandonedGrants = `SELECT id, attempt, tenant, type FROM jobs
  WHERE state = 'running' AND grant_abandoned_at IS NOT NULL AND grant_abandoned_at <= $1 AND NOT cancel_requested
  ORDER BY grant_abandoned_at LIMIT $2 FOR UPDATE SKIP LOCKED`;
const abandonGrants = `UPDATE jobs SET state = 'queued', redispatch_at = $3, dispatched_attempt = NULL,
    lease_token = NULL, lease_holder = NULL, lease_proof = NULL, lease_deadline = NULL, grant_abandoned_at = NULL, updated_at = $2
  WHERE id = ANY($1::text[]) AND state = 'running' AND grant_abandoned_at <= $2 AND NOT cancel_requested`;
const deleteOpenAttempts = 'DELETE FROM attempts WHERE job_id = ANY($1::text[]) AND ended_at IS NULL';
const hasUnsentWork = `SELECT 1 FROM outbox WHERE job_id = $1 AND kind = 'work' AND sent_at IS NULL LIMIT 1`;
const postponeRedispatch = `UPDATE jobs SET redispatch_at = $1 WHERE id = $2 AND state = 'queued' AND attempt = $3`;

const selectLogSummary = 'SELECT * FROM attempt_logs WHERE job_id = $1 AND attempt = $2';
const upsertLogSummary = `INSERT INTO attempt_logs (job_id, attempt, head_bytes, head_closed, tail_bytes, dropped_bytes,
    dropped_lines, next_seq, updated_at)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
  ON CONFLICT (job_id, attempt) DO UPDATE SET head_bytes = excluded.head_bytes, head_closed = excluded.head_closed,
    tail_bytes = excluded.tail_bytes, dropped_bytes = excluded.dropped_bytes, dropped_lines = excluded.dropped_lines,
    next_seq = excluded.next_seq, updated_at = excluded.updated_at`;
const insertLogChunk = `INSERT INTO log_chunks (job_id, attempt, seq, section, bytes, line_count, lines) VALUES ($1, $2, $3, $4, $5, $6, $7)`;
const selectOldestTailChunks = `SELECT seq, bytes, line_count FROM log_chunks
  WHERE job_id = $1 AND attempt = $2 AND section = 'tail' ORDER BY seq LIMIT $3`;
const deleteTailChunks = `DELETE FROM log_chunks WHERE job_id = $1 AND attempt = $2 AND section = 'tail' AND seq <= $3`;
const selectLogChunks = `SELECT seq, section, bytes, lines FROM log_chunks WHERE job_id = $1 AND attempt = $2 AND seq > $3 ORDER BY seq`;
// The dispatcher. A waiting job: queued, due, not released for its current attempt.
const waiting = (now: string) => `state = 'queued' AND not_before <= ${now} AND dispatched_attempt IS DISTINCT FROM attempt`;
// One dispatcher at a time across orchestrators: a transaction-scoped advisory lock.
const lockDispatch = `SELECT pg_advisory_xact_lock(${0x706c_6470}) -- 'pldp'`;
const selectWaitingGroups = `SELECT type, tenant, COUNT(*) AS count FROM jobs WHERE ${waiting('$1')} GROUP BY type, tenant`;
// A skip scan of jobs_waiting: each step seeks the pair after the last one found.
const selectQueuedGroups = `WITH RECURSIVE g AS (
    (SELECT type, tenant FROM jobs WHERE state = 'queued' ORDER BY type, tenant LIMIT 1)
    UNION ALL
    SELECT n.type, n.tenant FROM g CROSS JOIN LATERAL (
      SELECT type, tenant FROM jobs WHERE state = 'queued' AND (type, tenant) > (g.type, g.tenant) ORDER BY type, tenant LIMIT 1
    ) n
  )
  SELECT type, tenant FROM g`;
const waitingColumns = 'id, tenant, type, attempt, priority, concurrency_key, concurrency_limit';
const selectWaitingJobs = `SELECT ${waitingColumns} FROM jobs
  WHERE type = $1 AND tenant = $2 AND ${waiting('$3')} ORDER BY priority DESC, seq LIMIT $4 FOR UPDATE SKIP LOCKED`;
const selectWaitingJob = `SELECT ${waitingColumns}, state, not_before, dispatched_attempt FROM jobs WHERE id = $1`;
const selectOccupancy = `SELECT tenant, type, concurrency_key, SUM(running) AS running, SUM(released) AS released FROM (
    SELECT tenant, type, concurrency_key, 1 AS running, 0 AS released FROM jobs WHERE state = 'running' AND lease_deadline > $1
    UNION ALL
    SELECT tenant, type, concurrency_key, 0, 1 FROM jobs WHERE state = 'queued' AND dispatched_attempt = attempt
  ) AS held GROUP BY tenant, type, concurrency_key`;
const markDispatched = `UPDATE jobs SET dispatched_attempt = jobs.attempt, redispatch_at = $3
  FROM unnest($1::text[], $2::integer[]) AS r(id, attempt)
  WHERE jobs.id = r.id AND jobs.attempt = r.attempt AND jobs.state = 'queued'`;
const selectTenantWeights = 'SELECT tenant, weight FROM tenant_weights ORDER BY tenant';
const selectRunningLimits = 'SELECT tenant, type, max_running FROM running_limits ORDER BY tenant, type';
const upsertTenantWeight = 'INSERT INTO tenant_weights (tenant, weight) VALUES ($1, $2) ON CONFLICT (tenant) DO UPDATE SET weight = excluded.weight';
const deleteTenantWeight = 'DELETE FROM tenant_weights WHERE tenant = $1';
const upsertRunningLimit = `INSERT INTO running_limits (tenant, type, max_running) VALUES ($1, $2, $3)
  ON CONFLICT (tenant, type) DO UPDATE SET max_running = excluded.max_running`;
const deleteRunningLimit = 'DELETE FROM running_limits WHERE tenant = $1 AND type = $2';

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

const upsertUploadGrant = `INSERT INTO upload_grants (job_id, attempt, signed_at, valid_until) VALUES ($1, $2, $3, $4)
  ON CONFLICT (job_id, attempt) DO UPDATE SET valid_until = GREATEST(upload_grants.valid_until, excluded.valid_until)`;
// Grants locked, skipping those another cleaner's claim holds; the job rows are only read.
const selectDecidedUploadGrants = `SELECT g.job_id, g.attempt, j.tenant, j.state, j.attempt AS job_attempt
  FROM upload_grants g JOIN jobs j ON j.id = g.job_id
  WHERE g.closed_at IS NULL AND g.valid_until <= $2 AND (g.claimed_until IS NULL OR g.claimed_until <= $1)
    AND (j.state IN ('finished', 'failed') OR g.attempt < j.attempt)
  ORDER BY g.valid_until LIMIT $3 FOR UPDATE OF g SKIP LOCKED`;
// A set of (job, attempt) pairs as two arrays, $1 and $2.
const attemptSet = '(job_id, attempt) IN (SELECT * FROM unnest($1::text[], $2::integer[]))';
const claimUploadGrants = `UPDATE upload_grants SET claimed_until = $3 WHERE closed_at IS NULL AND ${attemptSet}`;
const closeUploadGrants = `UPDATE upload_grants SET closed_at = $3, outcome = $4 WHERE closed_at IS NULL AND ${attemptSet}`;

const selectActiveJobCounts = `SELECT state, type, tenant, COUNT(*)::integer AS count,
    MIN(CASE WHEN state = 'queued' AND not_before <= $1 THEN not_before END) AS oldest
  FROM jobs WHERE state IN ('queued', 'running') GROUP BY state, type, tenant`;

const selectRetryLinks = `SELECT (SELECT job_id FROM job_retries WHERE retry_id = $1) AS retry_of,
    (SELECT retry_id FROM job_retries WHERE job_id = $1) AS retried_by`;
const insertRetryLink = 'INSERT INTO job_retries (job_id, retry_id, created_at) VALUES ($1, $2, $3)';
// Unretried failed jobs (statements.ts), narrowed by a NullableFilter bound as $1 to $5.
const unretriedFailed = `j.state = 'failed' AND j.failure_reason <> 'cancelled'
    AND NOT EXISTS (SELECT 1 FROM job_retries r WHERE r.job_id = j.id)
    AND ($1::text IS NULL OR j.tenant = $1) AND ($2::text IS NULL OR j.type = $2)
    AND ($3::text IS NULL OR j.error_code = $3)
    AND ($4::bigint IS NULL OR j.ended_at >= $4) AND ($5::bigint IS NULL OR j.ended_at < $5)`;
const selectRetryCandidates = `SELECT j.* FROM jobs j WHERE ${unretriedFailed}
  ORDER BY j.ended_at, j.seq LIMIT $6 FOR UPDATE OF j SKIP LOCKED`;
const selectFailureGroups = `SELECT j.type, COALESCE(j.error_code, '') AS code, COUNT(*)::integer AS count,
    MIN(j.ended_at) AS first_ended_at, MAX(j.ended_at) AS last_ended_at, MAX(j.id) AS sample_job_id
  FROM jobs j WHERE ${unretriedFailed}
  GROUP BY j.type, COALESCE(j.error_code, '') ORDER BY count DESC, j.type, code`;

// Candidates are only read; a prune locks the ones it was given, skipping rows another pass holds.
const prunable = `j.ended_at IS NOT NULL AND j.ended_at <= $1
    AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.job_id = j.id AND o.sent_at IS NULL)
    AND NOT EXISTS (SELECT 1 FROM upload_grants g WHERE g.job_id = j.id AND g.closed_at IS NULL)`;
const selectPrunableJobs = `SELECT j.id, j.tenant, j.state, j.attempt, j.result FROM jobs j WHERE ${prunable}
  ORDER BY j.ended_at LIMIT $2`;
const lockPrunableJobs = `SELECT j.id, j.tenant, j.state, j.attempt, j.result FROM jobs j WHERE ${prunable} AND j.id = ANY($3::text[])
  ORDER BY j.ended_at LIMIT $2 FOR UPDATE OF j SKIP LOCKED`;
const deleteJobRows = [...jobOwnedRows, { table: 'jobs', column: 'id' }].map(({ table, column }) => `DELETE FROM ${table} WHERE ${column} = ANY($1::text[])`);

export class PgStatements implements AsyncLedgerStatements {
  constructor(private readonly ctx: PgContext) {}

  /** The one row `sql` answers (a SELECT, or a change RETURNING *), as a Job. */
  private async job(sql: string, values: unknown[]): Promise<Job | undefined> {
    const row = await this.ctx.row<JobRow>(sql, values);
    return row && toJob(row);
  }

  selectJob({ jobId }: Params<'selectJob'>): Promise<Job | undefined> {
    return this.job(selectJobById, [jobId]);
  }

  lockJob({ jobId }: Params<'lockJob'>): Promise<Job | undefined> {
    return this.job(lockJobById, [jobId]);
  }

  selectJobByKey({ tenant, idempotencyKey }: Params<'selectJobByKey'>): Promise<Job | undefined> {
    return this.job(selectJobByKey, [tenant, idempotencyKey]);
  }

  async lockIdempotencyKeys({ keys }: Params<'lockIdempotencyKeys'>): Promise<void> {
    await this.ctx.rows(lockKeys, [SUBMIT_LOCK_CLASS, keys]);
  }

  async insertJob({ id, submission: s, now, redispatchAt, dispatch: d, dispatchedAttempt }: Params<'insertJob'>): Promise<boolean> {
    const values = [id, s.tenant, s.type, s.input, s.requires, s.idempotencyKey, s.maxAttempts, now, redispatchAt, s.timeoutSeconds];
    values.push(d.notBefore, d.priority, d.concurrencyKey, d.concurrencyLimit, dispatchedAttempt, s.limits);
    return (await this.ctx.run(insertJob, values)) === 1;
  }

  grantLease(p: Params<'grantLease'>): Promise<Job | undefined> {
    return this.job(grantLease, [p.jobId, p.attempt, p.worker, p.token, p.deadline, p.now, p.proof, p.abandonAt, p.tenant]);
  }

  regrantLease(p: Params<'regrantLease'>): Promise<Job | undefined> {
    return this.job(regrantLease, [p.jobId, p.attempt, p.worker, p.deadline, p.now, p.proof, p.abandonAt, p.tenant]);
  }

  async insertAttempt(p: Params<'insertAttempt'>): Promise<void> {
    await this.ctx.run(insertAttempt, [p.jobId, p.attempt, p.worker, p.now]);
  }

  async extendLease(p: Params<'extendLease'>): Promise<boolean> {
    return (await this.ctx.run(extendLease, [p.jobId, p.attempt, p.token, p.now, p.deadline])) === 1;
  }

  async updateProgress(p: Params<'updateProgress'>): Promise<boolean> {
    return (await this.ctx.run(updateProgress, [p.jobId, p.attempt, p.token, p.now, p.fraction, p.message])) === 1;
  }

  async finishAttempt(p: Params<'finishAttempt'>): Promise<boolean> {
    return (await this.ctx.run(exits[p.expect].finish, [...guard(p), p.result])) === 1;
  }

  async failAttempt(p: Params<'failAttempt'>): Promise<boolean> {
    return (await this.ctx.run(exits[p.expect].fail, [...guard(p), p.reason, p.error.class, p.error.code, p.error.message, p.error.logTail ?? null])) === 1;
  }

  async requeueAttempt(p: Params<'requeueAttempt'>): Promise<boolean> {
    return (await this.ctx.run(exits[p.expect].requeue, [...guard(p), p.notBefore, p.redispatchAt])) === 1;
  }

  async closeAttempt(p: Params<'closeAttempt'>): Promise<void> {
    await this.ctx.run(closeAttempt, [p.jobId, p.attempt, p.now, p.outcome, p.error]);
  }

  async insertOutbox(p: Params<'insertOutbox'>): Promise<void> {
    await this.ctx.run(insertOutbox, [p.kind, p.jobId, p.body, p.now, p.availableAt]);
  }

  async insertWorkMessages({ messages, now, availableAt }: Params<'insertWorkMessages'>): Promise<void> {
    if (messages.length === 0) return;
    await this.ctx.run(insertWorkMessages, [messages.map((m) => m.jobId), messages.map((m) => m.body), now, availableAt]);
  }

  failQueuedJob({ jobId, attempt, reason, error, now }: Params<'failQueuedJob'>): Promise<Job | undefined> {
    return this.job(failQueuedJob, [jobId, attempt, reason, error.class, error.code, error.message, now]);
  }

  requestCancel({ jobId, now }: Params<'requestCancel'>): Promise<Job | undefined> {
    return this.job(requestCancel, [jobId, now]);
  }

  async withdrawWork({ jobId, now, reason }: Params<'withdrawWork'>): Promise<void> {
    await this.ctx.run(withdrawWork, [jobId, now, reason]);
  }

  async setAsideOutboxRow({ id, now, reason }: Params<'setAsideOutboxRow'>): Promise<OutboxRowRef | undefined> {
    const row = await this.ctx.row<{ kind: OutboxKind; job_id: string; body: unknown }>(setAsideOutboxRow, [id, now, reason]);
    return row && ({ kind: row.kind, jobId: row.job_id, body: row.body } as OutboxRowRef);
  }

  async selectDueOutbox({ now, limit }: Params<'selectDueOutbox'>): Promise<OutboxMessage[]> {
    return (await this.ctx.rows<OutboxRow>(selectDueOutbox, [now, limit])).map(toOutboxMessage);
  }

  async selectClaimableOutbox({ now, limit }: Params<'selectClaimableOutbox'>): Promise<OutboxMessage[]> {
    return (await this.ctx.rows<OutboxRow>(selectClaimableOutbox, [now, limit])).map(toOutboxMessage);
  }

  async claimOutboxRows({ ids, claimedUntil }: Params<'claimOutboxRows'>): Promise<void> {
    await this.ctx.run(claimOutboxRows, [ids, claimedUntil]);
  }

  async markOutboxSent({ ids, now }: Params<'markOutboxSent'>): Promise<void> {
    await this.ctx.run(markOutboxSent, [now, ids]);
  }

  async selectOutboxStats({ now }: Params<'selectOutboxStats'>): Promise<OutboxStats> {
    const row = await this.ctx.row<{ unsent: number; oldest: number | null }>(selectOutboxStats, [now]);
    return { unsent: row?.unsent ?? 0, oldestCreatedAt: row?.oldest ?? null };
  }

  async upsertFleetMember({ report, proof, now, freeBefore }: Params<'upsertFleetMember'>): Promise<boolean> {
    const rows = await this.ctx.rows(upsertFleetMember, [
      report.worker,
      proof,
      JSON.stringify(report.jobTypes),
      JSON.stringify(report.capabilities),
      JSON.stringify(report.heldBack),
      report.slots,
      report.running,
      now,
      freeBefore,
    ]);
    return rows.length === 1;
  }

  async selectFleet({ heardSince }: Params<'selectFleet'>): Promise<FleetRecord[]> {
    return (await this.ctx.rows<FleetRow>(selectFleet, [heardSince])).map(toFleetRecord);
  }

  async insertApiKey({ key }: Params<'insertApiKey'>): Promise<void> {
    await this.ctx.run(insertApiKey, apiKeyValues(key));
  }

  async insertApiKeyUnlessKnown({ key }: Params<'insertApiKeyUnlessKnown'>): Promise<boolean> {
    return (await this.ctx.rows(insertApiKeyUnlessKnown, apiKeyValues(key))).length === 1;
  }

  async selectWorkingApiKey({ keySha256 }: Params<'selectWorkingApiKey'>): Promise<KeyIdentity | undefined> {
    const row = await this.ctx.row<ApiKeyRow>(selectWorkingApiKey, [keySha256]);
    return row && toKeyIdentity(row);
  }

  async selectApiKey({ id }: Params<'selectApiKey'>): Promise<ApiKeyRecord | undefined> {
    const row = await this.ctx.row<ApiKeyRow>(selectApiKey, [id]);
    return row && toApiKeyRecord(row);
  }

  async selectApiKeys(): Promise<ApiKeyRecord[]> {
    return (await this.ctx.rows<ApiKeyRow>(selectApiKeys)).map(toApiKeyRecord);
  }

  async revokeApiKey({ id, now }: Params<'revokeApiKey'>): Promise<boolean> {
    return (await this.ctx.run(revokeApiKey, [id, now])) === 1;
  }

  async touchApiKey({ id, now }: Params<'touchApiKey'>): Promise<void> {
    await this.ctx.run(touchApiKey, [id, now]);
  }

  async selectAttempts({ jobId }: Params<'selectAttempts'>): Promise<AttemptRecord[]> {
    return (await this.ctx.rows<AttemptRow>(selectAttempts, [jobId])).map(toAttempt);
  }

  /** The statement names only the filters given, so each of its few shapes gets a plan that uses the matching index. */
  async selectJobPage(params: Params<'selectJobPage'>): Promise<Array<{ seq: number; job: Job }>> {
    const where: string[] = [];
    const values: unknown[] = [];
    const filter = (column: string, op: string, value: unknown) => {
      values.push(value);
      where.push(`${column} ${op} $${values.length}`);
    };
    if (params.tenant !== null) filter('tenant', '=', params.tenant);
    if (params.state !== null) filter('state', '=', params.state);
    if (params.type !== null) filter('type', '=', params.type);
    if (params.before !== null) filter('seq', '<', params.before);
    values.push(params.limit);
    const text = `SELECT * FROM jobs ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY seq DESC LIMIT $${values.length}`;
    return (await this.ctx.rows<JobRow>(text, values)).map((row) => ({ seq: row.seq, job: toJob(row) }));
  }

  countJobsByState(): Promise<Array<{ state: JobState; count: number }>> {
    return this.ctx.rows<{ state: JobState; count: number }>(countJobsByState);
  }

  async selectActiveJobCounts({ now }: Params<'selectActiveJobCounts'>): Promise<ActiveJobCount[]> {
    const rows = await this.ctx.rows<Pick<JobRow, 'type' | 'tenant'> & { state: ActiveJobCount['state']; count: number; oldest: number | null }>(
      selectActiveJobCounts,
      [now],
    );
    return rows.map((r) => ({ state: r.state, type: r.type, tenant: r.tenant, count: r.count, oldestDueSince: r.oldest }));
  }

  async selectRetryLinks({ jobId }: Params<'selectRetryLinks'>): Promise<RetryLinks> {
    const row = await this.ctx.row<{ retry_of: string | null; retried_by: string | null }>(selectRetryLinks, [jobId]);
    return { retryOf: row?.retry_of ?? null, retriedBy: row?.retried_by ?? null };
  }

  async insertRetryLink({ jobId, retryId, now }: Params<'insertRetryLink'>): Promise<void> {
    await this.ctx.run(insertRetryLink, [jobId, retryId, now]);
  }

  async selectRetryCandidates({ filter, limit }: Params<'selectRetryCandidates'>): Promise<Job[]> {
    return (await this.ctx.rows<JobRow>(selectRetryCandidates, [...filterValues(filter), limit])).map(toJob);
  }

  async selectFailureGroups({ filter }: Params<'selectFailureGroups'>): Promise<FailureGroup[]> {
    const rows = await this.ctx.rows<{
      type: string;
      code: string;
      count: number;
      first_ended_at: number;
      last_ended_at: number;
      sample_job_id: string;
    }>(selectFailureGroups, filterValues(filter));
    return rows.map((r) => ({
      type: r.type,
      code: r.code,
      count: r.count,
      firstEndedAt: r.first_ended_at,
      lastEndedAt: r.last_ended_at,
      sampleJobId: r.sample_job_id,
    }));
  }

  async selectPrunableJobs({ endedBefore, limit, jobIds }: Params<'selectPrunableJobs'>): Promise<PrunableJob[]> {
    const rows = await this.ctx.rows<Pick<JobRow, 'id' | 'tenant' | 'state' | 'attempt' | 'result'>>(
      jobIds === null ? selectPrunableJobs : lockPrunableJobs,
      jobIds === null ? [endedBefore, limit] : [endedBefore, limit, jobIds],
    );
    return rows.map((r) => ({ id: r.id, tenant: r.tenant, state: r.state, attempt: r.attempt, result: r.result }));
  }

  async deleteJobs({ jobIds }: Params<'deleteJobs'>): Promise<number> {
    let jobs = 0;
    // The job rows are locked (selectPrunableJobs): what names them cannot change meanwhile.
    for (const sql of deleteJobRows) jobs = await this.ctx.run(sql, [jobIds]);
    return jobs;
  }

  async selectExpiredLeases({ now, limit }: Params<'selectExpiredLeases'>): Promise<ExpiredLease[]> {
    const rows = await this.ctx.rows<Pick<JobRow, 'id' | 'attempt' | 'max_attempts' | 'cancel_requested' | 'tenant' | 'type'>>(selectExpiredLeases, [
      now,
      limit,
    ]);
    return rows.map((r) => ({
      id: r.id,
      attempt: r.attempt,
      maxAttempts: r.max_attempts,
      cancelRequested: r.cancel_requested,
      tenant: r.tenant,
      type: r.type,
    }));
  }

  requeueExpiredLeases(p: Params<'requeueExpiredLeases'>): Promise<number> {
    return this.ctx.run(requeueExpiredLeases, [p.jobIds, p.attempt, p.notBefore, p.redispatchAt, p.now]);
  }

  async closeExpiredAttempts(p: Params<'closeExpiredAttempts'>): Promise<void> {
    await this.ctx.run(closeExpiredAttempts, [p.jobIds, p.attempt, p.now, p.error]);
  }

  selectAbandonedGrants({ now, limit }: Params<'selectAbandonedGrants'>): Promise<AbandonedGrant[]> {
    return this.ctx.rows<AbandonedGrant>(selectAbandonedGrants, [now, limit]);
  }

  abandonGrants({ jobIds, now, redispatchAt }: Params<'abandonGrants'>): Promise<number> {
    return this.ctx.run(abandonGrants, [jobIds, now, redispatchAt]);
  }

  async deleteOpenAttempts({ jobIds }: Params<'deleteOpenAttempts'>): Promise<void> {
    await this.ctx.run(deleteOpenAttempts, [jobIds]);
  }

  async selectDueRedispatches({ now, limit }: Params<'selectDueRedispatches'>): Promise<DueRedispatch[]> {
    const rows = await this.ctx.rows<Pick<JobRow, 'id' | 'attempt' | 'tenant' | 'type' | 'not_before' | 'dispatched_attempt'>>(selectDueRedispatches, [
      now,
      limit,
    ]);
    return rows.map((r) => ({
      id: r.id,
      attempt: r.attempt,
      tenant: r.tenant,
      type: r.type,
      notBefore: r.not_before,
      dispatchedAttempt: r.dispatched_attempt,
    }));
  }

  async hasUnsentWork({ jobId }: Params<'hasUnsentWork'>): Promise<boolean> {
    return (await this.ctx.row(hasUnsentWork, [jobId])) !== undefined;
  }

  async postponeRedispatch({ jobId, attempt, redispatchAt }: Params<'postponeRedispatch'>): Promise<void> {
    await this.ctx.run(postponeRedispatch, [redispatchAt, jobId, attempt]);
  }

  async lockDispatch(): Promise<void> {
    await this.ctx.rows(lockDispatch);
  }

  selectQueuedGroups(): Promise<Array<{ type: string; tenant: string }>> {
    return this.ctx.rows<{ type: string; tenant: string }>(selectQueuedGroups);
  }

  selectWaitingGroups({ now }: Params<'selectWaitingGroups'>): Promise<WaitingGroup[]> {
    return this.ctx.rows<{ type: string; tenant: string; count: number }>(selectWaitingGroups, [now]);
  }

  async selectWaitingJobs(p: Params<'selectWaitingJobs'>): Promise<WaitingJob[]> {
    return (await this.ctx.rows<WaitingRow>(selectWaitingJobs, [p.type, p.tenant, p.now, p.limit])).map(toWaitingJob);
  }

  async selectWaitingJob({ jobId }: Params<'selectWaitingJob'>): Promise<ReturnType<LedgerStatements['selectWaitingJob']>> {
    const row = await this.ctx.row<WaitingRow & Pick<JobRow, 'state' | 'not_before' | 'dispatched_attempt'>>(selectWaitingJob, [jobId]);
    return row && { ...toWaitingJob(row), state: row.state, notBefore: row.not_before, dispatchedAttempt: row.dispatched_attempt };
  }

  async selectOccupancy({ now }: Params<'selectOccupancy'>): Promise<Occupancy[]> {
    const rows = await this.ctx.rows<Pick<JobRow, 'tenant' | 'type' | 'concurrency_key'> & { running: number; released: number }>(selectOccupancy, [now]);
    return rows.map((r) => ({ tenant: r.tenant, type: r.type, concurrencyKey: r.concurrency_key, running: r.running, released: r.released }));
  }

  markDispatched({ jobs, redispatchAt }: Params<'markDispatched'>): Promise<number> {
    return this.ctx.run(markDispatched, [jobs.map((j) => j.jobId), jobs.map((j) => j.attempt), redispatchAt]);
  }

  selectTenantWeights(): Promise<Array<{ tenant: string; weight: number }>> {
    return this.ctx.rows<{ tenant: string; weight: number }>(selectTenantWeights);
  }

  async selectRunningLimits(): Promise<RunningLimit[]> {
    const rows = await this.ctx.rows<{ tenant: string; type: string; max_running: number }>(selectRunningLimits);
    return rows.map((r) => ({ tenant: r.tenant, type: r.type, maxRunning: r.max_running }));
  }

  async setTenantWeight({ tenant, weight }: Params<'setTenantWeight'>): Promise<void> {
    if (weight === null) await this.ctx.run(deleteTenantWeight, [tenant]);
    else await this.ctx.run(upsertTenantWeight, [tenant, weight]);
  }

  async setRunningLimit({ tenant, type, maxRunning }: Params<'setRunningLimit'>): Promise<void> {
    if (maxRunning === null) await this.ctx.run(deleteRunningLimit, [tenant, type]);
    else await this.ctx.run(upsertRunningLimit, [tenant, type, maxRunning]);
  }

  async upsertUploadGrant(p: Params<'upsertUploadGrant'>): Promise<void> {
    await this.ctx.run(upsertUploadGrant, [p.jobId, p.attempt, p.now, p.validUntil]);
  }

  async selectDecidedUploadGrants(p: Params<'selectDecidedUploadGrants'>): Promise<DecidedUploadGrant[]> {
    const rows = await this.ctx.rows<{ job_id: string; attempt: number; tenant: string; state: JobState; job_attempt: number }>(selectDecidedUploadGrants, [
      p.now,
      p.validBefore,
      p.limit,
    ]);
    return rows.map((r) => ({ jobId: r.job_id, attempt: r.attempt, tenant: r.tenant, jobState: r.state, jobAttempt: r.job_attempt }));
  }

  async claimUploadGrants({ attempts, claimedUntil }: Params<'claimUploadGrants'>): Promise<void> {
    await this.ctx.run(claimUploadGrants, [...attemptArrays(attempts), claimedUntil]);
  }

  async closeUploadGrants({ attempts, now, outcome }: Params<'closeUploadGrants'>): Promise<void> {
    await this.ctx.run(closeUploadGrants, [...attemptArrays(attempts), now, outcome]);
  }

  async selectLogSummary({ jobId, attempt }: Params<'selectLogSummary'>): Promise<LogSummary | undefined> {
    const row = await this.ctx.row<{
      job_id: string;
      attempt: number;
      head_bytes: number;
      head_closed: boolean;
      tail_bytes: number;
      dropped_bytes: number;
      dropped_lines: number;
      next_seq: number;
    }>(selectLogSummary, [jobId, attempt]);
    return (
      row && {
        jobId: row.job_id,
        attempt: row.attempt,
        headBytes: Number(row.head_bytes),
        headClosed: row.head_closed,
        tailBytes: Number(row.tail_bytes),
        droppedBytes: Number(row.dropped_bytes),
        droppedLines: Number(row.dropped_lines),
        nextSeq: row.next_seq,
      }
    );
  }

  async upsertLogSummary(p: Params<'upsertLogSummary'>): Promise<void> {
    await this.ctx.run(upsertLogSummary, [p.jobId, p.attempt, p.headBytes, p.headClosed, p.tailBytes, p.droppedBytes, p.droppedLines, p.nextSeq, p.now]);
  }

  async insertLogChunk(p: Params<'insertLogChunk'>): Promise<void> {
    await this.ctx.run(insertLogChunk, [p.jobId, p.attempt, p.seq, p.section, p.bytes, p.lineCount, p.lines]);
  }

  async selectOldestTailChunks(p: Params<'selectOldestTailChunks'>): Promise<Array<{ seq: number; bytes: number; lineCount: number }>> {
    const rows = await this.ctx.rows<{ seq: number; bytes: number; line_count: number }>(selectOldestTailChunks, [p.jobId, p.attempt, p.limit]);
    return rows.map((r) => ({ seq: r.seq, bytes: Number(r.bytes), lineCount: r.line_count }));
  }

  async deleteTailChunks(p: Params<'deleteTailChunks'>): Promise<void> {
    await this.ctx.run(deleteTailChunks, [p.jobId, p.attempt, p.throughSeq]);
  }

  async selectLogChunks(p: Params<'selectLogChunks'>): Promise<LogChunk[]> {
    const rows = await this.ctx.rows<{ seq: number; section: LogSection; bytes: number; lines: string }>(selectLogChunks, [p.jobId, p.attempt, p.afterSeq]);
    return rows.map((r) => ({ seq: r.seq, section: r.section, bytes: Number(r.bytes), lines: JSON.parse(r.lines) as LogEntry[] }));
  }
}

/** A NullableFilter as unretriedFailed binds it: $1 to $5. */
function filterValues(filter: NullableFilter): unknown[] {
  return [filter.tenant, filter.type, filter.code, filter.endedAfter, filter.endedBefore];
}

/** A set of (job, attempt) pairs as the two arrays the statements unnest. */
function attemptArrays(attempts: readonly AttemptKey[]): [string[], number[]] {
  return [attempts.map((a) => a.jobId), attempts.map((a) => a.attempt)];
}

/** An AttemptGuard as the exits bind it: $1 to $5. */
function guard(p: AttemptGuard): unknown[] {
  return [p.jobId, p.attempt, p.token, p.now, p.cancelRequested];
}
