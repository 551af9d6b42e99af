/**
 * The Ledger, as both drivers implement it: every method runs one operation's plan, as a
 * write (in a transaction, answered once it committed) or a read (one statement on what
 * is committed). Which operation is which is stated here once; a driver supplies only
 * how it runs a plan as a write or a read (its transactions, group commit, retries,
 * storage errors) and how it closes.
 */
import type {
  AppendLogsParams,
  AttemptKey,
  NewApiKey,
  StoredApiKey,
  CancelParams,
  FailureGroupParams,
  ClaimUploadCleanupsParams,
  DispatchParams,
  GrantLeaseParams,
  HeartbeatParams,
  JobChangeFeed,
  JobChangeListener,
  LeaseRef,
  Ledger,
  ListJobsParams,
  OutboxClaimParams,
  OutboxSetAside,
  ReadLogsParams,
  PrunableJobsParams,
  PruneJobsParams,
  RecordProgressParams,
  RejectParams,
  ReleaseParams,
  RetryManyParams,
  RetryParams,
  RenewLeasesParams,
  SettleParams,
  SubmitParams,
  SubmitResult,
  SweepParams,
  UploadGrantParams,
} from '../ledger.js';
import { createApiKey, findApiKey, importApiKeys, isApiKeyActive, listApiKeys, recordApiKeyUse, revokeApiKey } from './api-keys.js';
import { cancel } from './cancel.js';
import { checkLease } from './check-lease.js';
import { dispatch, dispatchState, setRunningLimit, setTenantWeight, waitingFor } from './dispatch.js';
import { heartbeat, listFleet } from './fleet.js';
import { grantLease } from './grant-lease.js';
import { outboxClaim, outboxMarkSent, outboxStats, outboxTake, outboxUnclaim } from './outbox.js';
import type { OperationEnv, Plan } from './plan.js';
import { listFailureGroups } from './failures.js';
import { appendLogs, readLogs } from './logs.js';
import { countActiveJobs, countJobsByState, getAttempts, getJob, listJobs } from './queries.js';
import { getRetryLinks, retry, retryMany } from './redrive.js';
import { findPrunableJobs, pruneJobs } from './retention.js';
import { recordProgress } from './record-progress.js';
import { reject } from './reject.js';
import { release } from './release.js';
import { renewLeases } from './renew-leases.js';
import { outboxSetAside } from './set-aside.js';
import { settle } from './settle.js';
import { submit, submitMany } from './submit.js';
import { sweep } from './sweep.js';
import { claimUploadCleanups, markUploadsRemoved, recordUploadGrant } from './upload-grants.js';

/** Makes an operation's plan for one run of it (the ledger's time and config in `env`). */
export type MakePlan<T> = (env: OperationEnv) => Plan<T>;

// A submitMany of nothing: no transaction to open.
// eslint-disable-next-line require-yield -- a plan that needs no statement
function* nothingSubmitted(): Plan<SubmitResult[]> {
  return [];
}

export abstract class PlannedLedger implements Ledger {
  /**
   * Runs the plan `make` makes in a transaction of its own (or a group commit's SAVEPOINT),
   * making it afresh for each run of the transaction; answers once it committed. Throws a
   * LedgerError named after `operation` once the ledger is closed or storage fails.
   */
  protected abstract write<T>(operation: string, make: MakePlan<T>): Promise<T>;

  /** Runs the plan `make` makes (reads only) on what is committed, outside any explicit transaction. */
  protected abstract read<T>(operation: string, make: MakePlan<T>): Promise<T>;

  abstract watchJobChanges(listener: JobChangeListener): Promise<JobChangeFeed>;

  abstract close(): Promise<void>;

  submit(params: SubmitParams) {
    return this.write('submit', (env) => submit(params, env));
  }
  submitMany(params: SubmitParams[]) {
    if (params.length === 0) return this.read('submitMany', nothingSubmitted);
    return this.write('submitMany', (env) => submitMany(params, env));
  }
  grantLease(params: GrantLeaseParams) {
    return this.write('grantLease', (env) => grantLease(params, env));
  }
  renewLeases(params: RenewLeasesParams) {
    return this.write('renewLeases', (env) => renewLeases(params, env));
  }
  heartbeat(params: HeartbeatParams) {
    return this.write('heartbeat', (env) => heartbeat(params, env));
  }
  listFleet(params: { windowMs: number }) {
    return this.read('listFleet', (env) => listFleet(params, env));
  }
  createApiKey(params: NewApiKey) {
    return this.write('createApiKey', (env) => createApiKey(params, env));
  }
  findApiKey(keySha256: string) {
    return this.read('findApiKey', () => findApiKey(keySha256));
  }
  isApiKeyActive(id: string) {
    return this.read('isApiKeyActive', () => isApiKeyActive(id));
  }
  listApiKeys() {
    return this.read('listApiKeys', () => listApiKeys());
  }
  revokeApiKey(id: string) {
    return this.write('revokeApiKey', (env) => revokeApiKey(id, env));
  }
  recordApiKeyUse(id: string) {
    return this.write('recordApiKeyUse', (env) => recordApiKeyUse(id, env));
  }
  importApiKeys(keys: readonly StoredApiKey[]) {
    return this.write('importApiKeys', () => importApiKeys(keys));
  }
  checkLease(params: LeaseRef) {
    return this.read('checkLease', (env) => checkLease(params, env));
  }
  recordProgress(params: RecordProgressParams) {
    return this.write('recordProgress', (env) => recordProgress(params, env));
  }
  settle(params: SettleParams) {
    return this.write('settle', (env) => settle(params, env));
  }
  release(params: ReleaseParams) {
    return this.write('release', (env) => release(params, env));
  }
  cancel(params: CancelParams) {
    return this.write('cancel', (env) => cancel(params, env));
  }
  reject(params: RejectParams) {
    return this.write('reject', (env) => reject(params, env));
  }
  sweep(params?: SweepParams) {
    return this.write('sweep', (env) => sweep(params, env));
  }
  dispatch(params: DispatchParams) {
    return this.write('dispatch', (env) => dispatch(params, env));
  }
  setTenantWeight(params: { tenant: string; weight: number | null }) {
    return this.write('setTenantWeight', () => setTenantWeight(params));
  }
  setRunningLimit(params: { tenant?: string; type?: string; maxRunning: number | null }) {
    return this.write('setRunningLimit', () => setRunningLimit(params));
  }
  dispatchState() {
    return this.read('dispatchState', (env) => dispatchState(env));
  }
  waitingFor(jobId: string) {
    return this.read('waitingFor', (env) => waitingFor(jobId, env));
  }
  outboxTake(limit: number) {
    return this.read('outboxTake', (env) => outboxTake(limit, env));
  }
  outboxClaim(params: OutboxClaimParams) {
    return this.write('outboxClaim', (env) => outboxClaim(params, env));
  }
  outboxUnclaim(ids: readonly number[]) {
    return this.write('outboxUnclaim', () => outboxUnclaim(ids));
  }
  outboxMarkSent(ids: readonly number[]) {
    return this.write('outboxMarkSent', (env) => outboxMarkSent(ids, env));
  }
  outboxSetAside(rows: readonly OutboxSetAside[]) {
    return this.write('outboxSetAside', (env) => outboxSetAside(rows, env));
  }
  outboxStats() {
    return this.read('outboxStats', (env) => outboxStats(env));
  }
  recordUploadGrant(params: UploadGrantParams) {
    return this.write('recordUploadGrant', (env) => recordUploadGrant(params, env));
  }
  claimUploadCleanups(params: ClaimUploadCleanupsParams) {
    return this.write('claimUploadCleanups', (env) => claimUploadCleanups(params, env));
  }
  markUploadsRemoved(attempts: readonly AttemptKey[]) {
    return this.write('markUploadsRemoved', (env) => markUploadsRemoved(attempts, env));
  }
  appendLogs(params: AppendLogsParams) {
    return this.write('appendLogs', (env) => appendLogs(params, env));
  }
  readLogs(params: ReadLogsParams) {
    return this.read('readLogs', () => readLogs(params));
  }
  getJob(jobId: string, tenant?: string) {
    return this.read('getJob', () => getJob(jobId, tenant));
  }
  getAttempts(jobId: string) {
    return this.read('getAttempts', () => getAttempts(jobId));
  }
  listJobs(params: ListJobsParams) {
    return this.read('listJobs', () => listJobs(params));
  }
  countJobsByState() {
    return this.read('countJobsByState', () => countJobsByState());
  }
  retry(params: RetryParams) {
    return this.write('retry', (env) => retry(params, env));
  }
  retryMany(params: RetryManyParams) {
    return this.write('retryMany', (env) => retryMany(params, env));
  }
  getRetryLinks(jobId: string) {
    return this.read('getRetryLinks', () => getRetryLinks(jobId));
  }
  listFailureGroups(params: FailureGroupParams) {
    return this.read('listFailureGroups', () => listFailureGroups(params));
  }
  countActiveJobs() {
    return this.read('countActiveJobs', (env) => countActiveJobs(env));
  }
  findPrunableJobs(params: PrunableJobsParams) {
    return this.read('findPrunableJobs', () => findPrunableJobs(params));
  }
  pruneJobs(params: PruneJobsParams) {
    return this.write('pruneJobs', () => pruneJobs(params));
  }
}
