/**
 * dispatch: one pass of the dispatcher at the ledger's current time, in one transaction.
 *
 *   1. the sweep (sweep.ts), unless `sweep: false`: expired leases are taken back first, so
 *      that what they held is free before anything is counted (reap before you count: a
 *      limit counted over orphaned leases would hold back work forever). A pass that does
 *      not sweep still counts no lease past its deadline (selectOccupancy), so what it
 *      leaves to the next sweep is free in it too;
 *   2. in fair mode, for each job type with waiting jobs: its credit is the slots of the
 *      workers offering it (heard from within fleetWindowMs; each counted 1 + aheadPerSlot
 *      times) less the capacity the type
 *      holds (live leases and released, unleased work) and within the type's own limit;
 *      that many jobs are chosen by fair share between tenants, under the tenant, (tenant,
 *      type) and concurrency-key limits (shared/dispatch-rules.ts), and each one's work
 *      message is written to the outbox, marked released for its attempt.
 *
 * The broker then holds about one round of work per worker slot; a job waiting here has no
 * message in flight. Where several orchestrators share the database (PostgreSQL) a lock
 * taken first makes their passes one at a time, so two never count the same free slot.
 *
 * Params: fleetWindowMs, aheadPerSlot? (default 0), sweep? (default true), and the sweep's
 *   (limit?, redispatchTypes?)
 * Result: the sweep's report, the jobs released, how many due jobs still wait, and whether
 *   every one of them waits for a slot of its type (slotsFull: all taken, each with its
 *   aheadPerSlot released behind it), as opposed to a limit or a concurrency key.
 */
import { LedgerError } from '../errors.js';
import type { DispatchParams, DispatchReport, DispatchState, SweepReport, WaitingFor } from '../ledger.js';
import { Capacity, chooseReleases, type TenantQueue } from '../shared/dispatch-rules.js';
import { workMessage } from '../shared/outbox-messages.js';
import { run, type OperationEnv, type Plan } from './plan.js';
import type { WaitingJob } from './statements.js';
import { sweep } from './sweep.js';

/** Waiting jobs read per tenant beyond its possible share, to step over those whose concurrency key is full. */
const keyLookahead = 64;

export function* dispatch(params: DispatchParams, env: OperationEnv): Plan<DispatchReport> {
  if (!Number.isInteger(params.fleetWindowMs) || params.fleetWindowMs < 1) {
    throw new LedgerError('invalid_input', 'fleetWindowMs must be a whole number of milliseconds >= 1');
  }
  const aheadPerSlot = params.aheadPerSlot ?? 0;
  if (!Number.isInteger(aheadPerSlot) || aheadPerSlot < 0) throw new LedgerError('invalid_input', 'aheadPerSlot must be a whole number >= 0');
  const { now, config } = env;
  yield* run('lockDispatch', {});
  const swept = params.sweep === false ? nothingSwept() : yield* sweep(params, env);
  const nothingWaits = { ...swept, released: [], waiting: false, slotsFull: false };
  if (config.dispatch === 'fifo') return nothingWaits;

  // The pairs with queued jobs, not a count of the waiting ones: with a backlog of a million
  // jobs, every pass would read them all. A pair with none waiting reads no job below.
  const groups = yield* run('selectQueuedGroups', {});
  if (groups.length === 0) return nothingWaits;
  const slots = new Map<string, number>();
  for (const member of yield* run('selectFleet', { heardSince: now - params.fleetWindowMs })) {
    for (const type of member.jobTypes) slots.set(type, (slots.get(type) ?? 0) + member.slots * (1 + aheadPerSlot));
  }
  const capacity = new Capacity(yield* run('selectOccupancy', { now }), yield* run('selectRunningLimits', {}));
  const weights = new Map((yield* run('selectTenantWeights', {})).map(({ tenant, weight }) => [tenant, weight]));

  const released: WaitingJob[] = [];
  let waiting = false;
  let slotsFull = true;
  for (const type of [...new Set(groups.map((group) => group.type))].sort()) {
    const ofType = groups.filter((group) => group.type === type);
    const slotCredit = () => (slots.get(type) ?? 0) - capacity.ofType(type);
    const credit = Math.min(slotCredit(), capacity.typeRoom(type));
    const queues: TenantQueue[] = [];
    let typeWaits = false;
    for (const { tenant } of ofType) {
      if (credit > 0 && !capacity.tenantFull(tenant, type)) {
        const jobs = yield* run('selectWaitingJobs', { type, tenant, now, limit: credit + keyLookahead });
        queues.push({ tenant, weight: weights.get(tenant) ?? 1, jobs });
      } else if (!typeWaits) {
        // Not read for releases (no credit, or the tenant at a limit): one due job says
        // whether something still waits (a pair may hold only delayed jobs).
        typeWaits = (yield* run('selectWaitingJobs', { type, tenant, now, limit: 1 })).length > 0;
      }
    }
    if (queues.length > 0) {
      const chosen = chooseReleases(type, credit, queues, capacity);
      released.push(...chosen);
      // Fewer than the limit read means every due job of that tenant was seen.
      const releasedOf = (tenant: string) => chosen.filter((job) => job.tenant === tenant).length;
      if (queues.some(({ tenant, jobs }) => jobs.length > releasedOf(tenant))) typeWaits = true;
    }
    if (typeWaits) {
      waiting = true;
      if (slotCredit() > 0) slotsFull = false;
    }
  }
  if (released.length > 0) {
    const marked = yield* run('markDispatched', {
      jobs: released.map((job) => ({ jobId: job.id, attempt: job.attempt })),
      redispatchAt: now + config.redispatchAfterMs,
    });
    // The rows were read in this transaction, under the dispatch lock: anything else is a bug, and rolls the pass back.
    if (marked !== released.length) throw new Error(`planrun ledger: dispatch released ${marked} of ${released.length} jobs`);
    const messages = released.map((job) => ({ jobId: job.id, body: JSON.stringify(workMessage(job)) }));
    yield* run('insertWorkMessages', { messages, now, availableAt: now });
  }
  return {
    ...swept,
    released: released.map(({ id, attempt, tenant, type }) => ({ jobId: id, attempt, tenant, type })),
    waiting,
    slotsFull: waiting && slotsFull,
  };
}

function nothingSwept(): SweepReport {
  return { abandoned: [], requeued: [], exhausted: [], cancelled: [], redispatched: [] };
}

export function* setTenantWeight({ tenant, weight }: { tenant: string; weight: number | null }): Plan<void> {
  requireName('tenant', tenant);
  if (weight !== null && (!Number.isSafeInteger(weight) || weight < 1)) throw new LedgerError('invalid_input', 'weight must be an integer of at least 1');
  yield* run('setTenantWeight', { tenant, weight });
}

export function* setRunningLimit({ tenant = '', type = '', maxRunning }: { tenant?: string; type?: string; maxRunning: number | null }): Plan<void> {
  if (tenant !== '') requireName('tenant', tenant);
  if (type !== '') requireName('type', type);
  if (tenant === '' && type === '') throw new LedgerError('invalid_input', 'a running limit is for a tenant, a type, or both');
  if (maxRunning !== null && (!Number.isSafeInteger(maxRunning) || maxRunning < 0)) {
    throw new LedgerError('invalid_input', 'maxRunning must be an integer of at least 0');
  }
  yield* run('setRunningLimit', { tenant, type, maxRunning });
}

export function* dispatchState({ now }: OperationEnv): Plan<DispatchState> {
  const running = yield* run('selectOccupancy', { now });
  const usage = new Map<string, { tenant: string; type: string; queued: number; running: number }>();
  const entry = (tenant: string, type: string) => {
    const key = JSON.stringify([tenant, type]);
    let found = usage.get(key);
    if (!found) usage.set(key, (found = { tenant, type, queued: 0, running: 0 }));
    return found;
  };
  for (const row of running) entry(row.tenant, row.type).running += row.running;
  for (const group of yield* run('selectWaitingGroups', { now })) entry(group.tenant, group.type).queued += group.count;
  return {
    weights: yield* run('selectTenantWeights', {}),
    limits: yield* run('selectRunningLimits', {}),
    usage: [...usage.values()].sort((a, b) => (a.tenant === b.tenant ? (a.type < b.type ? -1 : 1) : a.tenant < b.tenant ? -1 : 1)),
  };
}

/**
 * Why the queued job waits: `scheduled` before its time; else, unless its work is
 * released, the first limit that holds it back (its tenant's, or its type's with its
 * tenant, as `tenant_limit`; its concurrency key), or `no_free_slot` (busy workers, its
 * type's own limit, or its turn among other tenants).
 */
export function* waitingFor(jobId: string, { now }: OperationEnv): Plan<WaitingFor | null> {
  const job = yield* run('selectWaitingJob', { jobId });
  if (!job || job.state !== 'queued') return null;
  if (job.notBefore > now) return 'scheduled';
  if (job.dispatchedAttempt === job.attempt) return null;
  const capacity = new Capacity(yield* run('selectOccupancy', { now }), yield* run('selectRunningLimits', {}));
  if (capacity.tenantFull(job.tenant, job.type)) return 'tenant_limit';
  if (capacity.keyFull(job)) return 'concurrency_key';
  return 'no_free_slot';
}

function requireName(field: string, value: unknown): void {
  if (typeof value !== 'string' || value.length === 0 || value.includes('\u0000')) {
    throw new LedgerError('invalid_input', `${field} must be a non-empty string without a NUL character`);
  }
}
