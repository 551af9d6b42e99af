/**
 * Sends the plan's jobs as an app would: at its planned time each submission goes over
 * the submit queue (message id = idempotency key, acknowledged by the broker's publisher
 * confirm) or over HTTP (`POST /v1/jobs` with `Idempotency-Key`, acknowledged by a 202
 * with the job). One that is not acknowledged (broker or orchestrator down) is sent again
 * with the same key until it is, as a careful app does. Every try is recorded, acked or
 * not; the checker holds planrun to the acknowledged ones.
 */
import type { Broker } from '../../src/broker/broker.js';
import type { Topology } from '../../src/topology.js';
import type { HistoryWriter } from './history.js';
import type { PlannedJob, Transport } from './plan.js';

export interface HttpTarget {
  /** Every orchestrator's API: a job's tries go round them, starting at one its index picks. */
  urls: readonly string[];
  /** tenant -> API key */
  keys: ReadonlyMap<string, string>;
}

export interface SubmitterOptions {
  broker: Broker;
  topology: Topology;
  history: HistoryWriter;
  /** Where HTTP submissions go; without it they go over the queue. */
  http?: HttpTarget;
  /** Wait between tries of an unacknowledged submission. */
  retryMs?: number;
  /** No new try starts after this time (ms since the epoch). */
  giveUpAt: number;
  /** Every fifth job carries a concurrency key of its tenant (limit 2), for the limits invariant; only where the build takes one. */
  concurrencyKeys?: boolean;
}

/** The concurrency key a planned job is submitted with, if any: every fifth job, one key per tenant, at most 2 at once. */
export function concurrencyOf(job: Pick<PlannedJob, 'index' | 'tenant'>): { concurrencyKey: string; concurrencyLimit: number } | undefined {
  return job.index % 5 === 0 ? { concurrencyKey: `chaos-${job.tenant}`, concurrencyLimit: 2 } : undefined;
}

export class Submitter {
  private readonly pending = new Set<Promise<void>>();
  private readonly timers = new Set<NodeJS.Timeout>();
  acked = 0;
  unacked = 0;
  sent = 0;
  /** Keys (tenant\0key) with at least one acknowledged submission. */
  readonly ackedKeys = new Set<string>();

  constructor(private readonly options: SubmitterOptions) {}

  /** Schedules every submission of `jobs` relative to `startedAt`. */
  schedule(jobs: readonly PlannedJob[], startedAt: number): void {
    for (const job of jobs) {
      job.submissions.forEach((submission, copy) => {
        const timer = setTimeout(
          () => {
            this.timers.delete(timer);
            const task = this.submit(job, copy, submission.transport).finally(() => this.pending.delete(task));
            this.pending.add(task);
          },
          Math.max(0, startedAt + submission.atMs - Date.now()),
        );
        this.timers.add(timer);
      });
    }
  }

  /** Resolves once every scheduled submission was sent and acknowledged, or given up. */
  async done(): Promise<void> {
    while (this.timers.size > 0 || this.pending.size > 0) {
      await Promise.allSettled([...this.pending]);
      if (this.timers.size > 0) await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  cancel(): void {
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
  }

  private async submit(job: PlannedJob, copy: number, planned: Transport): Promise<void> {
    const transport: Transport = planned === 'http' && this.options.http ? 'http' : 'queue';
    for (let retry = 0; ; retry++) {
      if (retry > 0 && Date.now() > this.options.giveUpAt) return;
      const outcome = await this.try(job, transport, retry);
      this.sent++;
      this.options.history.record({
        kind: 'submit',
        tenant: job.tenant,
        key: job.key,
        job: job.index,
        transport,
        acked: outcome.acked,
        copy,
        retry,
        input: job.input,
        maxAttempts: job.maxAttempts,
        ...(outcome.jobId === undefined ? {} : { jobId: outcome.jobId }),
        ...(outcome.error === undefined ? {} : { error: outcome.error }),
      });
      if (outcome.acked) {
        this.acked++;
        this.ackedKeys.add(`${job.tenant}\u0000${job.key}`);
        return;
      }
      this.unacked++;
      await new Promise((resolve) => setTimeout(resolve, this.options.retryMs ?? 700));
    }
  }

  private async try(job: PlannedJob, transport: Transport, retry: number): Promise<{ acked: boolean; jobId?: string; error?: string }> {
    const body = { type: job.type, input: job.input, maxAttempts: job.maxAttempts, ...(this.options.concurrencyKeys ? concurrencyOf(job) : {}) };
    try {
      if (transport === 'queue') {
        await this.options.broker.sendToQueue(this.options.topology.submitQueue, Buffer.from(JSON.stringify({ tenant: job.tenant, ...body })), {
          messageId: job.key,
        });
        return { acked: true };
      }
      const http = this.options.http!;
      const url = http.urls[(job.index + retry) % http.urls.length]!;
      const response = await fetch(`${url}/v1/jobs`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${http.keys.get(job.tenant)}`,
          'idempotency-key': job.key,
          'content-type': 'application/json',
        },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(5000),
      });
      const text = await response.text();
      if (response.status !== 202) return { acked: false, error: `HTTP ${response.status}: ${text.slice(0, 200)}` };
      const answer = JSON.parse(text) as { id?: unknown };
      if (typeof answer.id !== 'string') return { acked: false, error: `HTTP 202 without a job id: ${text.slice(0, 200)}` };
      return { acked: true, jobId: answer.id };
    } catch (error) {
      return { acked: false, error: error instanceof Error ? `${error.name}: ${error.message}` : String(error) };
    }
  }
}
