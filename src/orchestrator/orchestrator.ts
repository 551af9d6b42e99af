import type { Logger } from 'pino';
import type { Broker, Subscription } from '../broker/broker.js';
import { type Clock, systemClock } from '../core/clock.js';
import { decode, encode, type ControlAnswer } from '../control/protocol.js';
import type { Ledger, LedgerConfig, SubmitParams, SubmitResult } from '../ledger/ledger.js';
import { defaultTopology, type Topology } from '../topology.js';
import { ControlHandler } from './control-handler.js';
import { Fleet } from './fleet.js';
import { defaultOutboxRelayOptions, OutboxRelay, type OutboxRelayOptions } from './outbox-relay.js';
import { Sweeper } from './sweeper.js';

export interface OrchestratorOptions {
  ledger: Ledger;
  broker: Broker;
  /** Queue and exchange names; `planrun.*` unless given. */
  topology?: Topology;
  logger: Logger;
  /** The ledger's lease TTL, told to workers so they can keep their own deadline. */
  leaseTtlMs: LedgerConfig['leaseTtlMs'];
  sweepIntervalMs?: number;
  /** A worker not heard from for this long leaves the fleet. */
  fleetWindowMs?: number;
  /** Control requests handled at once. */
  controlConcurrency?: number;
  relay?: Partial<OutboxRelayOptions>;
  clock?: Clock;
}

/**
 * The process that owns the ledger: answers the control plane, relays the outbox,
 * sweeps expired leases. Every effect it has goes through the ledger first, so killing
 * it at any moment loses nothing: restarted, it relays what was not confirmed and
 * sweeps what expired meanwhile.
 */
export class Orchestrator {
  readonly fleet: Fleet;
  readonly relay: OutboxRelay;
  readonly sweeper: Sweeper;
  private readonly control: ControlHandler;
  private controlSubscription: Subscription | undefined;
  private readonly topology: Topology;

  constructor(private readonly options: OrchestratorOptions) {
    const clock = options.clock ?? systemClock;
    this.topology = options.topology ?? defaultTopology;
    this.fleet = new Fleet(clock, options.fleetWindowMs ?? Math.max(3 * options.leaseTtlMs, 60_000));
    this.control = new ControlHandler(options.ledger, this.fleet, { leaseTtlMs: options.leaseTtlMs });
    this.relay = new OutboxRelay(options.ledger, options.broker, this.topology, options.logger.child({ part: 'relay' }), {
      ...defaultOutboxRelayOptions,
      ...options.relay,
    });
    this.sweeper = new Sweeper(options.ledger, options.logger.child({ part: 'sweeper' }), options.sweepIntervalMs ?? 1000, () =>
      this.relay.notify(),
    );
  }

  async start(): Promise<void> {
    await this.topology.declareCore(this.options.broker);
    this.controlSubscription = await this.options.broker.serve(
      this.topology.controlQueue,
      async (request) => encode(await this.answer(request.body)),
      { prefetch: this.options.controlConcurrency ?? 64 },
    );
    this.relay.start();
    this.sweeper.start();
  }

  async submit(params: SubmitParams): Promise<SubmitResult> {
    const result = await this.options.ledger.submit(params);
    if (result.created) this.relay.notify();
    return result;
  }

  async submitMany(params: SubmitParams[]): Promise<SubmitResult[]> {
    const results = await this.options.ledger.submitMany(params);
    this.relay.notify();
    return results;
  }

  async stop(): Promise<void> {
    await this.controlSubscription?.cancel();
    await this.sweeper.stop();
    await this.relay.stop();
  }

  private async answer(body: Buffer): Promise<ControlAnswer> {
    let request: unknown;
    try {
      request = decode(body);
    } catch {
      return { op: 'error', code: 'invalid_request', message: 'control request is not JSON' };
    }
    const answer = await this.control.handle(request);
    if (answer.op === 'settle' && answer.accepted) this.relay.notify();
    return answer;
  }
}
