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

  /**
   * Where workers publish control requests: bound to the control queue only, so that a
   * worker's broker user may write to this exchange and nowhere else (publishing through
   * the default exchange would let it write to any queue). See docs/security.md.
   */
  get controlExchange(): string {
    return `${this.prefix}.control`;
  }

  /** Apps may submit jobs here; message id = idempotency key. */
  get submitQueue(): string {
    return `${this.prefix}.submit`;
  }

  /**
   * Apps with a least-privilege broker user submit through this exchange (any routing
   * key), bound to the submit queue; publishing to the queue through the default exchange
   * works too for users allowed to.
   */
  get submitExchange(): string {
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

  /** Every exchange the orchestrator declares (what a test or benchmark removes afterwards). */
  get exchanges(): string[] {
    return [this.controlExchange, this.submitExchange, this.resultsExchange];
  }

  /**
   * How every control request travels: to the control queue through the control
   * exchange. The one place that says so, so that every control operation follows it.
   */
  controlRoute(): { queue: string; exchange: string } {
    return { queue: this.controlQueue, exchange: this.controlExchange };
  }

  /** Declares what both sides rely on; each side declares its own work queues too. */
  async declareCore(broker: Broker): Promise<void> {
    await broker.declareQueue(this.controlQueue);
    await broker.declareTopicExchange(this.controlExchange);
    await broker.bindQueue(this.controlQueue, this.controlExchange, this.controlQueue);
    await broker.declareTopicExchange(this.resultsExchange);
  }

  /** The submit queue, the exchange bound to it, and the dead queue: declared by the orchestrator. */
  async declareSubmission(broker: Broker): Promise<void> {
    await broker.declareQueue(this.submitQueue);
    await broker.declareTopicExchange(this.submitExchange);
    await broker.bindQueue(this.submitQueue, this.submitExchange, '#');
    await broker.declareQueue(this.deadQueue);
  }
}

export function resultRoutingKey(tenant: string, type: string, state: 'finished' | 'failed'): string {
  return `${tenant}.${type}.${state}`;
}

export const defaultTopology = new Topology();
