/**
 * The embedded broker as a service of the orchestrator's process: stored in
 * `<data-dir>/broker.db` (so confirmed messages survive a crash of the process), served to
 * worker processes and apps on a Unix socket. What `planrun up` runs, and `planrun
 * orchestrator --broker-socket`.
 */
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EmbeddedBroker } from '../broker/embedded.js';
import { EmbeddedBrokerServer } from '../broker/embedded-socket-server.js';
import { EmbeddedBrokerStore } from '../broker/embedded-store.js';

export class EmbeddedBrokerService {
  private constructor(
    readonly broker: EmbeddedBroker,
    readonly server: EmbeddedBrokerServer,
  ) {}

  get socketPath(): string {
    return this.server.path;
  }

  /**
   * Opens the store in `dataDir` and listens on `socketPath` (default:
   * `defaultBrokerSocketPath(dataDir)`). `consumerTimeoutMs` works as RabbitMQ's
   * consumer_timeout (off unless given).
   */
  static async start(dataDir: string, options: { socketPath?: string; consumerTimeoutMs?: number } = {}): Promise<EmbeddedBrokerService> {
    const socketPath = options.socketPath ?? defaultBrokerSocketPath(dataDir);
    const broker = new EmbeddedBroker({
      store: EmbeddedBrokerStore.open(join(dataDir, 'broker.db')),
      ...(options.consumerTimeoutMs === undefined ? {} : { consumerTimeoutMs: options.consumerTimeoutMs }),
    });
    try {
      return new EmbeddedBrokerService(broker, await EmbeddedBrokerServer.listen({ broker, path: socketPath }));
    } catch (error) {
      await broker.close();
      throw error;
    }
  }

  /** Closes every client connection (their unacked messages go back to their queues), then the broker and its store. */
  async stop(): Promise<void> {
    await this.server.close();
    await this.broker.close();
  }
}

/**
 * `<data-dir>/broker.sock`, unless that path is too long for a Unix socket (about 107
 * bytes): then a name in the temp dir derived from the data dir, so it stays stable.
 */
export function defaultBrokerSocketPath(dataDir: string): string {
  const inDataDir = join(dataDir, 'broker.sock');
  if (Buffer.byteLength(inDataDir) <= 100) return inDataDir;
  return join(tmpdir(), `planrun-${createHash('sha256').update(dataDir).digest('hex').slice(0, 16)}.sock`);
}
