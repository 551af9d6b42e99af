/**
 * The PostgreSQL job change feed (Ledger.watchJobChanges): one connection of its own,
 * outside the pool, that LISTENs on the schema's channel. Every insert or update of a job
 * row sends the job's id on it from a trigger (migration 7), so the notification commits
 * with the change and is never told of one that rolled back. When the connection drops
 * (a server restart, pg_terminate_backend, a cut network) the listener is told
 * `interrupted`, the feed reconnects every `retryMs`, and says `resumed` once it listens again.
 */
import pg from 'pg';

import type { JobChangeFeed, JobChangeListener } from '../ledger.js';

/** The channel the jobs trigger of `schema` notifies (a schema name never needs quoting, see validateSchema). */
export function jobChangeChannel(schema: string): string {
  return `${schema}.jobs`;
}

export interface PgJobChangeFeedOptions {
  connectionString: string;
  schema: string;
  /** How long to wait before connecting again after the connection dropped or failed. */
  retryMs: number;
  connectionTimeoutMs: number;
}

export async function openPgJobChangeFeed(options: PgJobChangeFeedOptions, listener: JobChangeListener): Promise<JobChangeFeed> {
  const feed = new PgJobChangeFeed(options, listener);
  await feed.connect();
  return feed;
}

class PgJobChangeFeed implements JobChangeFeed {
  private client: pg.Client | undefined;
  private retry: NodeJS.Timeout | undefined;
  private closed = false;
  /** Whether the listener was told `interrupted` and not yet `resumed`. */
  private down = false;

  constructor(
    private readonly options: PgJobChangeFeedOptions,
    private readonly listener: JobChangeListener,
  ) {}

  async connect(): Promise<void> {
    this.retry = undefined;
    const channel = jobChangeChannel(this.options.schema);
    const client = new pg.Client({
      connectionString: this.options.connectionString,
      connectionTimeoutMillis: this.options.connectionTimeoutMs,
      keepAlive: true,
      application_name: 'planrun-job-changes',
    });
    client.on('notification', (message) => {
      if (message.channel === channel && message.payload) this.listener.changed(message.payload);
    });
    client.on('error', (error) => this.lost(client, error.message));
    client.on('end', () => this.lost(client, 'the connection ended'));
    try {
      await client.connect();
      await client.query(`LISTEN "${channel}"`);
    } catch (error) {
      this.lost(client, error instanceof Error ? error.message : String(error));
      return;
    }
    if (this.closed) {
      await client.end().catch(() => {});
      return;
    }
    this.client = client;
    if (this.down) {
      this.down = false;
      this.listener.resumed();
    }
  }

  /** The connection `client` failed: told once, then a reconnect is scheduled. */
  private lost(client: pg.Client, reason: string): void {
    if (this.closed || (this.client !== undefined && this.client !== client) || this.retry) return;
    this.client = undefined;
    void client.end().catch(() => {});
    if (!this.down) {
      this.down = true;
      this.listener.interrupted(`the ledger's change feed dropped: ${reason}`);
    }
    this.retry = setTimeout(() => void this.connect(), this.options.retryMs);
    this.retry.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => {});
  }
}
