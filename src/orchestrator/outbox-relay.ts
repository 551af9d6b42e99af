import type { Logger } from 'pino';
import { isBrokerError, type Broker } from '../broker/broker.js';
import type { Job, Ledger, OutboxMessage } from '../ledger/ledger.js';
import { isValidName, tenantNameProblem } from '../submission/rules.js';
import { resultRoutingKey, tenantHeader, type Topology } from '../topology.js';
import { Loop } from './loop.js';
import { withOutputFiles } from '../wire/outputs.js';

export interface OutboxRelayOptions {
  /** Rows taken and published (pipelined, each confirmed) per round. */
  batchSize: number;
  /** How long to wait when the outbox is empty, unless woken by `notify`. */
  idleIntervalMs: number;
  /** How long to wait after a failed publish before trying again. */
  retryIntervalMs: number;
  /**
   * How long a batch's rows are this relay's (ledger.outboxClaim): relays of other
   * orchestrators take other rows meanwhile, and take these once the claim runs out should
   * this relay die or stall. Longer than a batch takes to publish, or a slow batch is
   * published twice; short, since a dead relay's rows wait that long.
   */
  claimMs: number;
}

export const defaultOutboxRelayOptions: OutboxRelayOptions = { batchSize: 200, idleIntervalMs: 250, retryIntervalMs: 1000, claimMs: 5000 };

/** What the relay asks of the orchestrator around it. */
export interface OutboxRelayHooks {
  /**
   * The job types some worker of the fleet (or the configuration) offers, or undefined
   * when the fleet is empty and nothing is declared, so nobody can tell (the routing rule).
   */
  offeredTypes(): ReadonlySet<string> | undefined;
  /** Rows were set aside as undeliverable; `failedJobs` are the jobs that failed for it. */
  setAside(rows: readonly OutboxMessage[], failedJobs: readonly Job[]): void;
}

const noHooks: OutboxRelayHooks = { offeredTypes: () => undefined, setAside: () => undefined };

/** A row that can never be published, whatever the broker's state: it is set aside. */
class Undeliverable extends Error {}

/**
 * Publishes outbox rows to the broker and marks each one sent only after the broker
 * confirmed it. Each batch is claimed in the ledger first, so the relays of several
 * orchestrators on one ledger publish different rows; a relay that dies holding a claim
 * leaves its rows to the others once the claim runs out. A crash between the confirm and
 * the mark (or a claim that ran out mid-publish) sends the row again: work
 * messages are deduplicated by the lease, result messages carry the job id as their
 * message id, so a consumer sees the same id twice, never two answers.
 *
 * A row that can never be published (issue 18: a name the rules forbid, from before they
 * held on the submit queue, or a work queue the broker refuses to declare) is set aside
 * with its reason rather than retried forever at the head of the outbox, where it would
 * hold up every row behind it; its job fails as `undeliverable`. Only what is wrong with
 * the row itself counts: a broker that is down or drops the connection fails nothing, and
 * those rows are tried again.
 *
 * Work queues are declared only for types some worker offers (or, with an empty fleet,
 * for any type, since its job waits for workers): a job of a type nobody offers is
 * rejected on arrival, and must not leave a queue behind. When such a publish finds no
 * queue, the row is done with; the job, if still queued, gets its message again from the
 * sweeper once a worker of its type is idle.
 */
export class OutboxRelay {
  private readonly declaredWorkQueues = new Set<string>();
  private readonly loop: Loop;

  constructor(
    private readonly ledger: Ledger,
    private readonly broker: Broker,
    private readonly topology: Topology,
    private readonly logger: Logger,
    private readonly options: OutboxRelayOptions = defaultOutboxRelayOptions,
    private readonly hooks: OutboxRelayHooks = noHooks,
  ) {
    this.loop = new Loop('outbox relay', logger, async () => {
      const { published, failed } = await this.runOnce();
      if (failed > 0) return options.retryIntervalMs;
      return published === options.batchSize ? 0 : options.idleIntervalMs;
    });
  }

  start(): void {
    this.loop.start();
  }

  /** Something was just written to the outbox: publish it now rather than at the next tick. */
  notify(): void {
    this.loop.wake();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /**
   * Declares the work queues of types a worker offers, as soon as it is heard from: a
   * worker whose broker user may not declare queues (docs/security.md) waits for them.
   * A failure is logged, and the next heartbeat tries again.
   */
  declareWorkQueues(types: readonly string[]): void {
    for (const type of types) {
      if (!isValidName(type)) continue;
      const queue = this.topology.workQueue(type);
      if (this.declaredWorkQueues.has(queue)) continue;
      this.declareWorkQueue(queue).catch((error: unknown) =>
        this.logger.warn({ err: error, queue }, 'could not declare the work queue of a type a worker offers'),
      );
    }
  }

  private async declareWorkQueue(queue: string): Promise<void> {
    if (this.declaredWorkQueues.has(queue)) return;
    await this.broker.declareQueue(queue);
    this.declaredWorkQueues.add(queue);
  }

  /** One round: publish every due row of one batch, mark the confirmed ones sent, set aside the undeliverable. */
  async runOnce(): Promise<{ published: number; failed: number }> {
    const rows = await this.ledger.outboxClaim({ limit: this.options.batchSize, claimMs: this.options.claimMs });
    if (rows.length === 0) return { published: 0, failed: 0 };
    const offered = this.hooks.offeredTypes();
    const outcomes = await Promise.allSettled(rows.map((row) => this.publish(row, offered)));
    const sent = rows.filter((_, i) => outcomes[i]!.status === 'fulfilled').map((row) => row.id);
    const undeliverable: Array<{ row: OutboxMessage; reason: string }> = [];
    const failures: unknown[] = [];
    const unconfirmed: number[] = [];
    outcomes.forEach((outcome, i) => {
      if (outcome.status === 'fulfilled') return;
      if (outcome.reason instanceof Undeliverable) undeliverable.push({ row: rows[i]!, reason: outcome.reason.message });
      else {
        failures.push(outcome.reason);
        unconfirmed.push(rows[i]!.id);
      }
    });
    if (sent.length > 0) await this.ledger.outboxMarkSent(sent);
    if (undeliverable.length > 0) await this.setAside(undeliverable);
    if (failures.length > 0) {
      this.logger.warn({ failed: failures.length, error: String(failures[0]) }, 'outbox rows not confirmed; will retry');
      // Tried again after the retry interval, by this relay or another, not a claim later.
      await this.ledger.outboxUnclaim(unconfirmed);
    }
    // Set-aside rows count as done: the next batch may follow at once.
    return { published: sent.length + undeliverable.length, failed: failures.length };
  }

  private async setAside(rows: Array<{ row: OutboxMessage; reason: string }>): Promise<void> {
    const { failedJobs } = await this.ledger.outboxSetAside(rows.map(({ row, reason }) => ({ id: row.id, reason })));
    for (const { row, reason } of rows)
      this.logger.warn({ outboxId: row.id, kind: row.kind, jobId: row.jobId, reason }, 'outbox row set aside: it can never be published');
    this.hooks.setAside(
      rows.map(({ row }) => row),
      failedJobs,
    );
  }

  private async publish(row: OutboxMessage, offered: ReadonlySet<string> | undefined): Promise<void> {
    const problem = undeliverableProblem(row);
    if (problem) throw new Undeliverable(problem);
    if (row.kind === 'work') {
      const { body } = row;
      const queue = this.topology.workQueue(body.type);
      const declare = offered === undefined || offered.has(body.type);
      if (declare) {
        await this.declareWorkQueue(queue).catch((error: unknown) => {
          // The broker refused this one queue (a closed channel, a lost connection are
          // `disconnected`): no retry will change its mind.
          throw isBrokerError(error, 'refused') ? new Undeliverable(`the broker refuses the work queue ${queue}: ${error.message}`) : error;
        });
      }
      try {
        await this.broker.sendToQueue(queue, Buffer.from(JSON.stringify(body)), {
          messageId: `${body.jobId}@${body.attempt}`,
          headers: { [tenantHeader]: body.tenant },
        });
      } catch (error) {
        // No queue for a type nobody offers: the row is done with (see above).
        if (declare || !isBrokerError(error, 'unroutable')) throw error;
        this.logger.debug({ jobId: body.jobId, type: body.type }, 'no worker queue for this job type; the work message is dropped');
      }
      return;
    }
    // A row written before results carried outputFiles gains them here, as a read of the job does.
    const body = row.body.result ? { ...row.body, result: withOutputFiles(row.body.result) } : row.body;
    await this.broker.publish(this.topology.resultsExchange, resultRoutingKey(body.tenant, body.type, body.state), Buffer.from(JSON.stringify(body)), {
      messageId: body.id,
      headers: { [tenantHeader]: body.tenant },
    });
  }
}

/**
 * Why a row can never be published, or undefined. Its tenant and type become words of a
 * routing key or queue name, so they must follow the submission rules' name rule (which
 * also keeps every key far under AMQP's 255 bytes); rows written before the submit queue
 * held to the rules may not.
 */
function undeliverableProblem(row: OutboxMessage): string | undefined {
  const { tenant, type } = row.body;
  const tenantProblem = tenantNameProblem(tenant);
  if (tenantProblem) return `its ${tenantProblem}, so it cannot name a queue or routing key`;
  if (!isValidName(type))
    return `its job type ${JSON.stringify(type.length > 80 ? `${type.slice(0, 80)}...` : type)} breaks the name rule, so it cannot name a queue or routing key`;
  return undefined;
}
