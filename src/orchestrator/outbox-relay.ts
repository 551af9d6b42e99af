import type { Logger } from 'pino';
import type { Broker } from '../broker/broker.js';
import type { Ledger, OutboxMessage } from '../ledger/ledger.js';
import { resultRoutingKey, tenantHeader, type Topology } from '../topology.js';
import { Loop } from './loop.js';

export interface OutboxRelayOptions {
  /** Rows taken and published (pipelined, each confirmed) per round. */
  batchSize: number;
  /** How long to wait when the outbox is empty, unless woken by `notify`. */
  idleIntervalMs: number;
  /** How long to wait after a failed publish before trying again. */
  retryIntervalMs: number;
}

export const defaultOutboxRelayOptions: OutboxRelayOptions = { batchSize: 200, idleIntervalMs: 250, retryIntervalMs: 1000 };

/**
 * Publishes outbox rows to the broker and marks each one sent only after the broker
 * confirmed it. A crash between the confirm and the mark sends the row again: work
 * messages are deduplicated by the lease, result messages carry the job id as their
 * message id, so a consumer sees the same id twice, never two answers.
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

  /** One round: publish every due row of one batch, then mark the confirmed ones sent. */
  async runOnce(): Promise<{ published: number; failed: number }> {
    const rows = await this.ledger.outboxTake(this.options.batchSize);
    if (rows.length === 0) return { published: 0, failed: 0 };
    const outcomes = await Promise.allSettled(rows.map((row) => this.publish(row)));
    const sent = rows.filter((_, i) => outcomes[i]!.status === 'fulfilled').map((row) => row.id);
    const failures = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected');
    if (sent.length > 0) await this.ledger.outboxMarkSent(sent);
    if (failures.length > 0) {
      this.logger.warn({ failed: failures.length, error: String(failures[0]!.reason) }, 'outbox rows not confirmed; will retry');
    }
    return { published: sent.length, failed: failures.length };
  }

  private async publish(row: OutboxMessage): Promise<void> {
    if (row.kind === 'work') {
      const { body } = row;
      const queue = this.topology.workQueue(body.type);
      if (!this.declaredWorkQueues.has(queue)) {
        await this.broker.declareQueue(queue);
        this.declaredWorkQueues.add(queue);
      }
      await this.broker.sendToQueue(queue, Buffer.from(JSON.stringify(body)), {
        messageId: `${body.jobId}@${body.attempt}`,
        headers: { [tenantHeader]: body.tenant },
      });
      return;
    }
    const { body } = row;
    await this.broker.publish(this.topology.resultsExchange, resultRoutingKey(body.tenant, body.type, body.state), Buffer.from(JSON.stringify(body)), {
      messageId: body.id,
      headers: { [tenantHeader]: body.tenant },
    });
  }
}
