/**
 * What `--profile ha` runs on besides planrun: a private PostgreSQL for the shared ledger
 * (never the shared server on 5432), a fault proxy in front of it for each orchestrator
 * (the `ledger-cut` fault), and a RabbitMQ cluster of three nodes for quorum queues
 * (never the shared broker on 5672). Whoever starts them stops them, also on failure.
 */
import { FaultProxy } from '../../test/testing/fault-proxy.js';
import { PrivatePostgres } from '../../test/testing/private-postgres.js';
import { brokerNodeNames } from './plan.js';
import { RabbitCluster } from './rabbit-cluster.js';
import type { RabbitNode } from './rabbit-node.js';

export const haOrchestrators = 3;
export const haBrokerNodes = 3;

export interface HaServicesOptions {
  dir: string;
  consumerTimeoutMs: number;
  /** Each gets a proxy of its own to PostgreSQL. */
  orchestrators: readonly string[];
  log: (message: string) => void;
}

export class HaServices {
  private constructor(
    readonly postgres: PrivatePostgres,
    readonly cluster: RabbitCluster,
    /** By orchestrator name. */
    readonly ledgerProxies: ReadonlyMap<string, FaultProxy>,
  ) {}

  /** Starts PostgreSQL, its proxies and the cluster; stops what it started if a step fails. */
  static async start(options: HaServicesOptions): Promise<HaServices> {
    const started: Array<{ stop(): Promise<void> }> = [];
    try {
      const postgres = await PrivatePostgres.start();
      started.push(postgres);
      options.log(`private PostgreSQL on 127.0.0.1:${postgres.port}`);
      const proxies = new Map<string, FaultProxy>();
      for (const name of options.orchestrators) {
        const proxy = await FaultProxy.start({ port: postgres.port });
        started.push({ stop: () => proxy.close() });
        proxies.set(name, proxy);
      }
      const cluster = await RabbitCluster.start({ dir: options.dir, size: haBrokerNodes, consumerTimeoutMs: options.consumerTimeoutMs, log: options.log });
      return new HaServices(postgres, cluster, proxies);
    } catch (error) {
      await Promise.allSettled(started.reverse().map((s) => s.stop()));
      throw error;
    }
  }

  /** The ledger URL an orchestrator is given: through its own proxy. */
  ledgerUrl(orchestrator: string): string {
    const proxy = this.ledgerProxies.get(orchestrator);
    if (!proxy) throw new Error(`no ledger proxy for ${orchestrator}`);
    return `postgres://postgres@127.0.0.1:${proxy.port}/postgres`;
  }

  /** Straight to PostgreSQL: for the keys before the run and the final ledger after it. */
  get directLedgerUrl(): string {
    return this.postgres.url();
  }

  /** `--amqp` for planrun's processes: every node, no password in argv (amqplib defaults to guest's). */
  get amqpArg(): string {
    return this.cluster.nodes.map((node) => `amqp://127.0.0.1:${node.port}`).join(',');
  }

  /** The nodes by the names the plan's broker faults target (rabbit-1...). */
  get brokers(): ReadonlyMap<string, RabbitNode> {
    const names = brokerNodeNames(this.cluster.nodes.length);
    return new Map(this.cluster.nodes.map((node, i) => [names[i]!, node]));
  }

  /** Stops the cluster, the proxies and PostgreSQL; never throws. */
  async stop(): Promise<void> {
    await this.cluster.stop();
    await Promise.allSettled([...this.ledgerProxies.values()].map((proxy) => proxy.close()));
    await this.postgres.stop().catch(() => undefined);
  }
}
