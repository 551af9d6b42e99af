/**
 * The adversary: an outsider on the broker, forging control requests throughout the run.
 * It learns what anyone can (the fleet's worker names and the running jobs' holders, from
 * the HTTP API with a tenant's key) and, every interval, sends to the control queue:
 *
 * - a lease request for a running job, naming its holder, with a secret of its own;
 * - a heartbeat naming a live worker of the fleet with a secret of its own and no types
 *   (accepted, it would empty that worker's offer and make routing fail jobs);
 * - a settle of a running job as finished with a forged result and a guessed token;
 * - an `inputs` request for a running job with a guessed token (answered live, it would
 *   hand out presigned GETs of the tenant's objects);
 * - each once with the fleet key (an insider who read it) and once without.
 *
 * Every answer goes into the history as a `forgery` event; the checker's
 * `forgeries-refused` invariant says none was granted or accepted.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import type { Broker } from '../../src/broker/broker.js';
import { forgeControlRequest } from '../../test/testing/control-forgery.js';
import type { Topology } from '../../src/topology.js';
import { forgedResultMark, type HistoryWriter } from './history.js';

export interface AdversaryOptions {
  broker: () => Broker | undefined;
  topology: Topology;
  history: HistoryWriter;
  fleetKey: string;
  /** The HTTP API and one key per tenant (without the API, only ghosts and blind settles). */
  /** Every orchestrator's API: each look goes to one at random. */
  http?: { urls: readonly string[]; keys: ReadonlyMap<string, string> };
  intervalMs: number;
  /** Workers heard from within this long count as live members to impersonate. */
  liveWithinMs: number;
}

interface Target {
  jobId: string;
  attempt: number;
  tenant: string;
  holder: string;
}

export class Adversary {
  private stopped = false;
  private loop: Promise<void> | undefined;
  sent = 0;

  constructor(private readonly options: AdversaryOptions) {}

  start(): void {
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      await delay(this.options.intervalMs);
      if (this.stopped) break;
      await this.round().catch(() => undefined);
    }
  }

  private async round(): Promise<void> {
    const target = await this.runningJob();
    const members = await this.liveMembers();
    for (const fleetKey of [this.options.fleetKey, undefined]) {
      if (target) {
        await this.forge('lease', fleetKey, {
          op: 'lease',
          jobId: target.jobId,
          attempt: target.attempt,
          tenant: target.tenant,
          worker: target.holder,
          secret: newSecret(),
        });
        await this.forge('settle', fleetKey, {
          op: 'settle',
          jobId: target.jobId,
          attempt: target.attempt,
          tenant: target.tenant,
          token: randomUUID(),
          outcome: { kind: 'finished', result: { data: { mark: forgedResultMark } } },
        });
        await this.forge('inputs', fleetKey, {
          op: 'inputs',
          jobId: target.jobId,
          attempt: target.attempt,
          tenant: target.tenant,
          token: randomUUID(),
          locations: [`s3://bucket/${target.tenant}/uploads/${randomUUID()}/input.bin`],
        });
      }
      const impersonated = members[Math.floor(Math.random() * members.length)];
      const worker = impersonated ?? `ghost-${randomBytes(3).toString('hex')}`;
      await this.forge(
        'heartbeat',
        fleetKey,
        {
          op: 'heartbeat',
          worker,
          secret: newSecret(),
          jobTypes: [],
          capabilities: [],
          slots: 0,
          leases: target ? [{ jobId: target.jobId, attempt: target.attempt, tenant: target.tenant, token: randomUUID() }] : [],
        },
        impersonated !== undefined,
      );
    }
  }

  /**
   * Sends one forged request and records its answer. `impersonates`: a heartbeat that names
   * a live member (a ghost's own new name is a new worker to an orchestrator that has
   * handed out its fleet key; see docs/security.md).
   */
  private async forge(op: string, fleetKey: string | undefined, request: Record<string, unknown>, impersonates = true): Promise<void> {
    const broker = this.options.broker();
    if (!broker) return;
    this.sent++;
    try {
      const ans = await forgeControlRequest(broker, this.options.topology, request, { timeoutMs: 3000, ...(fleetKey ? { fleetKey } : {}) });
      this.options.history.record({
        kind: 'forgery',
        op,
        withKey: fleetKey !== undefined,
        impersonates,
        req: request,
        ans: ans as unknown as Record<string, unknown>,
      });
    } catch {
      // Unanswered (a fault is on): nothing was decided, nothing to check.
    }
  }

  private async api<T>(path: string, key: string): Promise<T | undefined> {
    const http = this.options.http;
    if (!http) return undefined;
    const url = http.urls[Math.floor(Math.random() * http.urls.length)]!;
    const response = await fetch(`${url}${path}`, { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(2000) }).catch(() => undefined);
    if (!response?.ok) return undefined;
    return (await response.json()) as T;
  }

  private async runningJob(): Promise<Target | undefined> {
    const keys = [...(this.options.http?.keys ?? [])];
    const [tenant, key] = keys[Math.floor(Math.random() * keys.length)] ?? [];
    if (!tenant || !key) return undefined;
    const page = await this.api<{ jobs: Array<{ id: string }> }>('/v1/jobs?state=running&limit=20', key);
    const picked = page?.jobs[Math.floor(Math.random() * page.jobs.length)];
    if (!picked) return undefined;
    const job = await this.api<{ id: string; state: string; attempt: number; attempts: Array<{ attempt: number; worker: string }> }>(
      `/v1/jobs/${picked.id}`,
      key,
    );
    const attempt = job?.attempts.find((a) => a.attempt === job.attempt);
    if (!job || job.state !== 'running' || !attempt) return undefined;
    return { jobId: job.id, attempt: job.attempt, tenant, holder: attempt.worker };
  }

  private async liveMembers(): Promise<string[]> {
    const key = [...(this.options.http?.keys.values() ?? [])][0];
    if (!key) return [];
    const fleet = await this.api<{ workers: Array<{ id: string; lastHeartbeat: string }> }>('/v1/fleet', key);
    const horizon = Date.now() - this.options.liveWithinMs;
    return (fleet?.workers ?? []).filter((w) => new Date(w.lastHeartbeat).getTime() >= horizon).map((w) => w.id);
  }
}

function newSecret(): string {
  return randomBytes(24).toString('base64url');
}
