/**
 * The names planrun's queues and exchanges have on the broker: a contract with apps
 * (submit queue, results exchange) and between planrun's own processes. Every name
 * starts with one prefix, `planrun` unless configured, so several installations (or
 * test runs) can share one broker without seeing each other's messages.
 */
import type { Broker } from './broker/broker.js';

/** Message header carrying the tenant on every message planrun publishes. */
export const tenantHeader = 'planrun-tenant';

export class Topology {
  constructor(readonly prefix = 'planrun') {
    if (!/^[A-Za-z0-9_-]+$/.test(prefix)) throw new TypeError(`topology prefix must be letters, digits, "-" or "_", got "${prefix}"`);
  }

  /** Control-plane requests from workers to the orchestrator. */
  get controlQueue(): string {
    return `${this.prefix}.control`;
  }

  /** Apps may submit jobs here; message id = idempotency key. */
  get submitQueue(): string {
    return `${this.prefix}.submit`;
  }

  /** Submissions that could not be read, with the reason. */
  get deadQueue(): string {
    return `${this.prefix}.dead`;
  }

  /** Result and failure messages: routing key `<tenant>.<type>.<finished|failed>`, message id = job id. */
  get resultsExchange(): string {
    return `${this.prefix}.results`;
  }

  /** Work messages of one job type. */
  workQueue(type: string): string {
    return `${this.prefix}.work.${type}`;
  }

  /** Declares what both sides rely on; each side declares its own work queues too. */
  async declareCore(broker: Broker): Promise<void> {
    await broker.declareQueue(this.controlQueue);
    await broker.declareTopicExchange(this.resultsExchange);
  }
}

export function resultRoutingKey(tenant: string, type: string, state: 'finished' | 'failed'): string {
  return `${tenant}.${type}.${state}`;
}

export const defaultTopology = new Topology();
