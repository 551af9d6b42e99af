/**
 * A RabbitMQ cluster of the test's own on this machine: three (or more) RabbitNodes, each
 * with its own name, ports and data folder, sharing one Erlang cookie, the second and
 * later joined to the first (`rabbitmqctl join_cluster`). Quorum queues declared on it
 * are replicated on every node, so a confirmed message survives the loss of one.
 *
 * Whoever starts it stops it, also when a test fails: three Erlang VMs are not cheap.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { RabbitNode } from './rabbit-node.js';

export interface RabbitClusterOptions {
  /** A folder of its own: each node gets a sub-folder. */
  dir: string;
  /** How many nodes (default 3: a quorum queue then survives the loss of one). */
  size?: number;
  consumerTimeoutMs?: number;
  log?: (message: string) => void;
}

export class RabbitCluster {
  private constructor(readonly nodes: RabbitNode[]) {}

  /** Starts the nodes and joins them; stops what it started if any step fails. */
  static async start(options: RabbitClusterOptions): Promise<RabbitCluster> {
    const size = options.size ?? 3;
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`a cluster of ${size} nodes?`);
    const cookie = randomBytes(16).toString('hex');
    const nodes: RabbitNode[] = [];
    try {
      // One at a time: the machine is small, and each boot is CPU-heavy.
      for (let index = 0; index < size; index++) {
        nodes.push(
          await RabbitNode.start({
            dir: join(options.dir, `node-${index + 1}`),
            consumerTimeoutMs: options.consumerTimeoutMs ?? 30 * 60_000,
            cookie,
            ...(options.log ? { log: options.log } : {}),
          }),
        );
      }
      const [first, ...others] = nodes;
      for (const node of others) {
        await node.ctl(['stop_app'], 60_000);
        await node.ctl(['join_cluster', first!.nodeName], 60_000);
        await node.startApp();
      }
      const cluster = new RabbitCluster(nodes);
      await cluster.awaitMembers();
      options.log?.(`RabbitMQ cluster of ${size} up: ${nodes.map((node) => `${node.nodeName} on ${node.port}`).join(', ')}`);
      return cluster;
    } catch (error) {
      await Promise.all(nodes.map((node) => node.stop()));
      throw error;
    }
  }

  /** Every node's URL, comma-separated: what `--amqp` takes for a cluster. */
  get url(): string {
    return this.nodes.map((node) => node.url).join(',');
  }

  /** Waits until every node sees every other one running (after a start or a restart). */
  async awaitMembers(timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const running = await this.runningNodes().catch(() => [] as string[]);
      if (this.nodes.every((node) => running.includes(node.nodeName))) return;
      if (Date.now() > deadline) throw new Error(`cluster members running: ${running.join(', ') || 'none'} (want ${this.nodes.length})`);
      await new Promise((resolve) => setTimeout(resolve, 300));
    }
  }

  /** Stops every node (each politely, then with SIGKILL if it lingers); never throws. */
  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((node) => node.stop().catch(() => undefined)));
  }

  /** The running members as the first node that answers sees them. */
  private async runningNodes(): Promise<string[]> {
    let lastError: unknown;
    for (const node of this.nodes) {
      try {
        const status = JSON.parse(await node.ctl(['cluster_status', '--formatter', 'json'], 30_000)) as { running_nodes?: string[] };
        return status.running_nodes ?? [];
      } catch (error) {
        lastError = error;
      }
    }
    throw lastError;
  }
}
