/**
 * The dispatcher's rules, for every driver: the dispatch fields of a submission checked,
 * and the choice of which waiting jobs to release (fair shares between tenants, limits),
 * made on plain rows so that it is tested without a database.
 *
 * Fair share: within a job type, the next job released is the head of the waiting tenant
 * whose capacity of that type (live leases and released, unleased work) divided by its
 * weight is smallest; ties go to the larger weight, then the tenant name. This is weighted
 * max-min fairness computed from the ledger's own counts, not from state kept between
 * passes: a restart, or another orchestrator dispatching, continues the same shares.
 * Within a tenant, higher priority first, then submission order.
 */
import { LedgerError, LedgerErrorCode } from '../errors.js';
import type { RunningLimit, SubmitParams } from '../ledger.js';
import type { Occupancy, WaitingJob } from '../operations/statements.js';

/** The dispatch fields of a submission, checked: notBefore is when it may start (epoch ms). */
export interface ValidDispatch {
  priority: number;
  concurrencyKey: string | null;
  concurrencyLimit: number | null;
  notBefore: number;
}

/** Longest delay a submission may ask for: a year (a later runAt is a mistake more often than a plan). */
const maxDelayMs = 366 * 24 * 3600 * 1000;

function invalid(message: string): LedgerError {
  return new LedgerError(LedgerErrorCode.invalidInput, message);
}

export function validateDispatch(params: SubmitParams, now: number): ValidDispatch {
  const { priority = 0, concurrencyKey, concurrencyLimit, runAt, delaySeconds } = params;
  if (!Number.isSafeInteger(priority)) throw invalid('priority must be an integer when given');
  if (concurrencyKey !== undefined && (typeof concurrencyKey !== 'string' || concurrencyKey.length === 0 || concurrencyKey.includes('\u0000'))) {
    throw invalid('concurrencyKey must be a non-empty string without a NUL character when given');
  }
  if (concurrencyLimit !== undefined) {
    if (concurrencyKey === undefined) throw invalid('concurrencyLimit needs a concurrencyKey');
    if (!Number.isSafeInteger(concurrencyLimit) || concurrencyLimit < 1) throw invalid('concurrencyLimit must be an integer of at least 1 when given');
  }
  if (runAt !== undefined && delaySeconds !== undefined) throw invalid('give runAt or delaySeconds, not both');
  if (runAt !== undefined && (!Number.isSafeInteger(runAt) || runAt < 0)) throw invalid('runAt must be a time (milliseconds since the epoch) when given');
  if (delaySeconds !== undefined && (typeof delaySeconds !== 'number' || !Number.isFinite(delaySeconds) || delaySeconds < 0)) {
    throw invalid('delaySeconds must be a number of seconds of at least 0 when given');
  }
  const notBefore = runAt ?? now + Math.round((delaySeconds ?? 0) * 1000);
  if (notBefore - now > maxDelayMs) throw invalid('runAt and delaySeconds may put a job at most a year ahead');
  return {
    priority,
    concurrencyKey: concurrencyKey ?? null,
    concurrencyLimit: concurrencyKey === undefined ? null : (concurrencyLimit ?? 1),
    notBefore: Math.max(now, notBefore),
  };
}

/** Why a waiting job is not released (the API's `waitingFor`). */
export type WaitingFor = 'tenant_limit' | 'concurrency_key' | 'no_free_slot' | 'scheduled';

/** The capacity held now, counted the ways the limits ask for. */
export class Capacity {
  private readonly counts = new Map<string, number>();
  private readonly limits = new Map<string, number>();

  constructor(occupancy: readonly Occupancy[], limits: readonly RunningLimit[]) {
    for (const row of occupancy) this.add(row, row.running + row.released);
    for (const limit of limits) this.limits.set(pair(limit.tenant, limit.type), limit.maxRunning);
  }

  /** Counts one more job released. */
  take(job: Pick<WaitingJob, 'tenant' | 'type' | 'concurrencyKey'>): void {
    this.add(job, 1);
  }

  /** How much of `type` is held, by every tenant. */
  ofType(type: string): number {
    return this.count('type', type);
  }

  /** How much of `type` the tenant holds. */
  ofTenantType(tenant: string, type: string): number {
    return this.count('tenant-type', pair(tenant, type));
  }

  /** How many more jobs of `type` its limit lets run (Infinity without one). */
  typeRoom(type: string): number {
    return this.room(pair('', type), this.ofType(type));
  }

  /** Whether the tenant's own limit, or its limit for the job's type, holds a job back. */
  tenantFull(tenant: string, type: string): boolean {
    return this.room(pair(tenant, ''), this.count('tenant', tenant)) <= 0 || this.room(pair(tenant, type), this.ofTenantType(tenant, type)) <= 0;
  }

  /** Whether the job's concurrency key is at its limit. */
  keyFull(job: Pick<WaitingJob, 'tenant' | 'concurrencyKey' | 'concurrencyLimit'>): boolean {
    if (job.concurrencyKey === null) return false;
    return this.count('key', pair(job.tenant, job.concurrencyKey)) >= (job.concurrencyLimit ?? 1);
  }

  /** The limit set for (tenant, type) ('' for any), if any. */
  limitOf(tenant: string, type: string): number | undefined {
    return this.limits.get(pair(tenant, type));
  }

  private room(key: string, held: number): number {
    const limit = this.limits.get(key);
    return limit === undefined ? Infinity : limit - held;
  }

  private add(row: Pick<Occupancy, 'tenant' | 'type' | 'concurrencyKey'>, n: number): void {
    const keys = [
      ['type', row.type],
      ['tenant', row.tenant],
      ['tenant-type', pair(row.tenant, row.type)],
    ];
    if (row.concurrencyKey !== null) keys.push(['key', pair(row.tenant, row.concurrencyKey)]);
    for (const [kind, key] of keys) this.counts.set(`${kind}:${key}`, (this.counts.get(`${kind}:${key}`) ?? 0) + n);
  }

  private count(kind: string, key: string): number {
    return this.counts.get(`${kind}:${key}`) ?? 0;
  }
}

function pair(a: string, b: string): string {
  return JSON.stringify([a, b]);
}

/** A tenant's waiting jobs of one type, as the dispatcher reads them (head first). */
export interface TenantQueue {
  tenant: string;
  weight: number;
  jobs: WaitingJob[];
}

/**
 * The jobs of one type to release now, at most `credit`, taking each from the tenant with
 * the smallest weighted share (see the top of this file), skipping a job whose concurrency
 * key is full and a tenant whose limit is reached. Counts each release in `capacity`.
 */
export function chooseReleases(type: string, credit: number, queues: readonly TenantQueue[], capacity: Capacity): WaitingJob[] {
  const released: WaitingJob[] = [];
  const open = queues.map((queue) => ({ ...queue, next: 0 }));
  while (released.length < credit && open.length > 0) {
    open.sort((a, b) => share(a) - share(b) || b.weight - a.weight || (a.tenant < b.tenant ? -1 : 1));
    const queue = open[0]!;
    let job: WaitingJob | undefined;
    if (!capacity.tenantFull(queue.tenant, type)) {
      while (queue.next < queue.jobs.length && !job) {
        const candidate = queue.jobs[queue.next++]!;
        if (!capacity.keyFull(candidate)) job = candidate;
      }
    }
    if (!job) {
      open.shift();
      continue;
    }
    capacity.take(job);
    released.push(job);
  }
  return released;

  function share(queue: TenantQueue): number {
    return capacity.ofTenantType(queue.tenant, type) / queue.weight;
  }
}
