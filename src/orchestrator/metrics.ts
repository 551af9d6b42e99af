import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Clock } from '../core/clock.js';
import type { ActiveJobCount, Job, Ledger } from '../ledger/ledger.js';
import { JobState } from '../ledger/states.js';
import type { TypeLabels } from './type-labels.js';

const secondsBuckets = [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 14_400];

export interface MetricsOptions {
  /**
   * Label the queued and running gauges with `tenant` too (`--metrics-tenant-label`).
   * Off by default: every tenant multiplies those series, and on the API port any key
   * reads `/metrics`, so tenant names would show to every tenant.
   */
  tenantLabel?: boolean;
}

/**
 * The orchestrator's Prometheus metrics. Counts of jobs by state and the outbox backlog
 * are read from the ledger when scraped (the ledger is the truth, and survives restarts);
 * events (grants, settles, sweeps) feed counters and histograms as they happen. Per-type
 * series carry `type` from `types`, which keeps their number bounded.
 */
export class OrchestratorMetrics {
  readonly registry = new Registry();
  private readonly submitted: Counter<'type'>;
  private readonly settles: Counter<'type' | 'transition'>;
  private readonly leaseExpirations: Counter<'type'>;
  private readonly grantsAbandoned: Counter<'type'>;
  private readonly retries: Counter<'type'>;
  private readonly exhausted: Counter<'type'>;
  private readonly setAside: Counter<'kind'>;
  private readonly submitToStart: Histogram<'type'>;
  private readonly runDuration: Histogram<'type' | 'outcome'>;
  private readonly storeObjectsRemoved: Counter;
  private readonly storeUploadsAborted: Counter;
  private readonly pruned: Counter;
  /** When each live attempt was granted, to time its run; bounded, forgotten at settle. */
  private readonly grantedAt = new Map<string, number>();

  constructor(
    ledger: Ledger,
    private readonly clock: Clock,
    private readonly types: TypeLabels,
    options: MetricsOptions = {},
  ) {
    // prom-client's own names start with process_ (process_cpu_user_seconds_total): the
    // prefix makes them planrun_process_..., never planrun_process_process_....
    collectDefaultMetrics({ register: this.registry, prefix: 'planrun_' });
    this.registerActiveJobGauges(ledger, options.tenantLabel ?? false);
    new Gauge({
      name: 'planrun_jobs',
      help: 'Jobs in the ledger by state',
      labelNames: ['state'],
      registers: [this.registry],
      async collect() {
        const counts = await ledger.countJobsByState();
        for (const state of Object.values(JobState)) this.set({ state }, counts[state]);
      },
    });
    new Gauge({
      name: 'planrun_running_leases',
      help: 'Leases held by workers right now',
      registers: [this.registry],
      async collect() {
        this.set((await ledger.countJobsByState()).running);
      },
    });
    const outboxStats = oneReadPerScrape(() => ledger.outboxStats());
    // Fair dispatch: what each tenant has waiting and running per type, and the limits set.
    const typeLabels = types;
    const dispatchState = oneReadPerScrape(() => ledger.dispatchState());
    new Gauge({
      name: 'planrun_tenant_jobs',
      help: 'Jobs per tenant and type: queued (due, waiting for the dispatcher) and running (live leases)',
      labelNames: ['tenant', 'type', 'state'],
      registers: [this.registry],
      async collect() {
        const { usage } = await dispatchState();
        this.reset();
        for (const { tenant, type, queued, running } of usage) {
          this.inc({ tenant, type: typeLabels.of(type), state: 'queued' }, queued);
          this.inc({ tenant, type: typeLabels.of(type), state: 'running' }, running);
        }
      },
    });
    new Gauge({
      name: 'planrun_running_limit',
      help: "Running limits set (planrun tenants set, planrun types set); tenant or type '' stands for any",
      labelNames: ['tenant', 'type'],
      registers: [this.registry],
      async collect() {
        const { limits } = await dispatchState();
        this.reset();
        for (const { tenant, type, maxRunning } of limits) this.set({ tenant, type: type === '' ? '' : typeLabels.of(type) }, maxRunning);
      },
    });
    new Gauge({
      name: 'planrun_outbox_backlog',
      help: 'Outbox messages due and not yet confirmed by the broker',
      registers: [this.registry],
      async collect() {
        this.set((await outboxStats()).unsent);
      },
    });
    new Gauge({
      name: 'planrun_outbox_oldest_age_seconds',
      help: 'Age of the oldest unsent outbox message (0 when none)',
      registers: [this.registry],
      async collect() {
        const { oldestCreatedAt } = await outboxStats();
        this.set(oldestCreatedAt === null ? 0 : Math.max(0, (clock.now() - oldestCreatedAt) / 1000));
      },
    });
    this.submitted = new Counter({ name: 'planrun_jobs_submitted_total', help: 'Jobs accepted', labelNames: ['type'], registers: [this.registry] });
    this.settles = new Counter({
      name: 'planrun_settles_total',
      help: 'Accepted settles by transition (finish, fail_permanent, retry, exhaust, cancel_running)',
      labelNames: ['type', 'transition'],
      registers: [this.registry],
    });
    this.leaseExpirations = new Counter({
      name: 'planrun_lease_expirations_total',
      help: 'Leases that ran out before their attempt settled',
      labelNames: ['type'],
      registers: [this.registry],
    });
    this.grantsAbandoned = new Counter({
      name: 'planrun_grants_abandoned_total',
      help: 'Grants nobody took up within the grant window, back to queued at the same attempt (edge abandon)',
      labelNames: ['type'],
      registers: [this.registry],
    });
    this.retries = new Counter({
      name: 'planrun_retries_total',
      help: 'Attempts scheduled after a failed or expired one',
      labelNames: ['type'],
      registers: [this.registry],
    });
    this.exhausted = new Counter({
      name: 'planrun_exhausted_total',
      help: 'Jobs that used up every attempt',
      labelNames: ['type'],
      registers: [this.registry],
    });
    this.setAside = new Counter({
      name: 'planrun_outbox_set_aside_total',
      help: 'Outbox rows set aside because they can never be published (their work-message jobs fail as undeliverable)',
      labelNames: ['kind'],
      registers: [this.registry],
    });
    this.submitToStart = new Histogram({
      name: 'planrun_submit_to_start_seconds',
      help: 'From submission to the first lease grant',
      labelNames: ['type'],
      buckets: secondsBuckets,
      registers: [this.registry],
    });
    this.runDuration = new Histogram({
      name: 'planrun_run_duration_seconds',
      help: 'From lease grant to settle, per attempt',
      labelNames: ['type', 'outcome'],
      buckets: secondsBuckets,
      registers: [this.registry],
    });
    this.storeObjectsRemoved = new Counter({
      name: 'planrun_store_objects_removed_total',
      help: 'Objects that attempts which lost left in the object store, removed after the cleanup grace',
      registers: [this.registry],
    });
    this.storeUploadsAborted = new Counter({
      name: 'planrun_store_uploads_aborted_total',
      help: 'Unfinished multipart uploads of attempts which lost, aborted after the cleanup grace',
      registers: [this.registry],
    });
    this.pruned = new Counter({
      name: 'planrun_jobs_pruned_total',
      help: 'Ended jobs deleted by the retention pass (--retain), with their attempts and stored outputs',
      registers: [this.registry],
    });
  }

  /**
   * Queued and running jobs by type (and tenant), and the lag: how long the oldest due
   * queued job of each type has waited. One ledger read per scrape, through the partial
   * index of active jobs, shared by the three gauges: prom-client collects every metric of
   * a scrape at once, so the first to ask starts the read and the others await the same one.
   */
  private registerActiveJobGauges(ledger: Ledger, tenantLabel: boolean): void {
    const clock = this.clock;
    const types = this.types;
    const read = oneReadPerScrape(() => ledger.countActiveJobs());
    const labelNames = tenantLabel ? (['type', 'tenant'] as const) : (['type'] as const);
    const labelsOf = (row: ActiveJobCount) => ({ type: types.of(row.type), ...(tenantLabel ? { tenant: row.tenant } : {}) });
    // A series whose type (or tenant) has no such jobs left reads 0, not its last value:
    // each gauge starts every scrape from 0 on every series it ever had.
    const setCounts = async (gauge: Gauge<'type' | 'tenant'>, state: ActiveJobCount['state']) => {
      const active = await read();
      gauge.reset();
      for (const labels of seen[state].values()) gauge.set(labels, 0);
      for (const row of active.filter((r) => r.state === state)) {
        const labels = labelsOf(row);
        seen[state].set(JSON.stringify(labels), labels);
        gauge.inc(labels, row.count);
      }
    };
    const seen = { queued: new Map<string, Record<string, string>>(), running: new Map<string, Record<string, string>>() };
    const agedTypes = new Set<string>();
    new Gauge({
      name: 'planrun_queued_jobs',
      help: `Jobs waiting for a worker (due or in a backoff), by type${tenantLabel ? ' and tenant' : ''}`,
      labelNames,
      registers: [this.registry],
      async collect() {
        await setCounts(this, 'queued');
      },
    });
    new Gauge({
      name: 'planrun_running_jobs',
      help: `Jobs a worker holds a lease on, by type${tenantLabel ? ' and tenant' : ''}`,
      labelNames,
      registers: [this.registry],
      async collect() {
        await setCounts(this, 'running');
      },
    });
    new Gauge({
      name: 'planrun_oldest_queued_age_seconds',
      help: 'How long the longest-waiting queued job of each type has been due (past any backoff): how far behind the workers of that type are; 0 when none waits',
      labelNames: ['type'],
      registers: [this.registry],
      async collect() {
        const active = await read();
        const now = clock.now();
        const oldest = new Map<string, number>([...agedTypes].map((type) => [type, 0]));
        for (const row of active) {
          if (row.state !== 'queued') continue;
          const type = types.of(row.type);
          const age = row.oldestDueSince === null ? 0 : Math.max(0, (now - row.oldestDueSince) / 1000);
          oldest.set(type, Math.max(oldest.get(type) ?? 0, age));
        }
        for (const [type, age] of oldest) {
          agedTypes.add(type);
          this.set({ type }, age);
        }
      },
    });
  }

  jobsPruned(n: number): void {
    this.pruned.inc(n);
  }

  storeObjectsRemovedBy(n: number): void {
    this.storeObjectsRemoved.inc(n);
  }

  storeUploadsAbortedBy(n: number): void {
    this.storeUploadsAborted.inc(n);
  }

  outboxSetAside(kind: 'work' | 'result'): void {
    this.setAside.inc({ kind });
  }

  jobSubmitted(job: Job): void {
    this.submitted.inc({ type: this.types.of(job.type) });
  }

  leaseGranted(job: Job): void {
    const now = this.clock.now();
    if (job.attempt === 1) this.submitToStart.observe({ type: this.types.of(job.type) }, (now - job.createdAt) / 1000);
    if (this.grantedAt.size >= 100_000) this.grantedAt.clear();
    this.grantedAt.set(`${job.id}@${job.attempt}`, now);
  }

  settled(job: Job, attempt: number, transition: string): void {
    const type = this.types.of(job.type);
    this.settles.inc({ type, transition });
    if (transition === 'retry') this.retries.inc({ type });
    if (transition === 'exhaust') this.exhausted.inc({ type });
    const key = `${job.id}@${attempt}`;
    const grantedAt = this.grantedAt.get(key);
    if (grantedAt !== undefined) {
      this.runDuration.observe({ type, outcome: transition }, (this.clock.now() - grantedAt) / 1000);
      this.grantedAt.delete(key);
    }
  }

  /** A lease ran out: the sweeper scheduled the next attempt, or ended the job. */
  leaseExpired(job: Pick<Job, 'type'>, outcome: 'requeued' | 'exhausted' | 'cancelled'): void {
    const type = this.types.of(job.type);
    this.leaseExpirations.inc({ type });
    if (outcome === 'requeued') this.retries.inc({ type });
    if (outcome === 'exhausted') this.exhausted.inc({ type });
  }

  /** A grant nobody took up went back to queued at the same attempt (abandon). */
  grantAbandoned(job: Job): void {
    this.grantsAbandoned.inc({ type: this.types.of(job.type) });
  }

  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}

/**
 * prom-client collects every metric of a scrape at once: the gauges built on one ledger
 * read share it (the first to ask starts it, the others await the same one), so they agree
 * and the ledger is read once per scrape, not once per gauge.
 */
function oneReadPerScrape<T>(read: () => Promise<T>): () => Promise<T> {
  let reading: Promise<T> | undefined;
  return () =>
    (reading ??= read().finally(() => {
      reading = undefined;
    }));
}
