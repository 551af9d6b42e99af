/**
 * The app's side of the results: a durable queue bound to `<prefix>.results` with `#`,
 * consumed by the chaos runner, each delivery recorded (message id, routing key,
 * redelivered flag, body) before it is acked. So a result message counts as received
 * once it is in the history, and a redelivery shows up as a second record.
 */
import type { Broker, Subscription } from '../../src/broker/broker.js';
import type { ResultMessage } from '../../src/ledger/ledger.js';
import type { Topology } from '../../src/topology.js';
import type { HistoryWriter } from './history.js';

export class ResultObserver {
  /** tenant\0idempotencyKey of every job a result was received for. */
  readonly answeredKeys = new Set<string>();
  received = 0;
  private subscription: Subscription | undefined;

  constructor(
    /** The runner's connection (the observer starts once it is there). */
    private readonly connection: () => Broker,
    private readonly topology: Topology,
    private readonly history: HistoryWriter,
  ) {}

  get queue(): string {
    return `${this.topology.prefix}.chaos-results`;
  }

  async start(): Promise<void> {
    const broker = this.connection();
    await broker.declareTopicExchange(this.topology.resultsExchange);
    await broker.declareQueue(this.queue);
    await broker.bindQueue(this.queue, this.topology.resultsExchange, '#');
    this.subscription = await broker.consume(
      this.queue,
      (delivery) => {
        let body: ResultMessage;
        try {
          body = JSON.parse(delivery.body.toString('utf8')) as ResultMessage;
        } catch {
          body = { unparseable: delivery.body.toString('utf8').slice(0, 500) } as unknown as ResultMessage;
        }
        this.history.record({
          kind: 'result',
          messageId: delivery.messageId ?? null,
          routingKey: delivery.routingKey,
          redelivered: delivery.redelivered,
          body,
        });
        this.received++;
        if (typeof body.tenant === 'string' && typeof body.idempotencyKey === 'string') {
          this.answeredKeys.add(`${body.tenant}\u0000${body.idempotencyKey}`);
        }
        delivery.ack();
      },
      { prefetch: 200 },
    );
  }

  async stop(): Promise<void> {
    await this.subscription?.cancel();
  }
}
