/**
 * What makes the embedded broker durable, as RabbitMQ's durable queues and persistent
 * messages are: its queues, exchanges and bindings, and every message waiting in a queue,
 * kept in a SQLite file (`<data-dir>/broker.db`) with `synchronous=FULL`.
 *
 * planrun relies on it for two things the ledger cannot redo: a message on the submit
 * queue that was confirmed to the app (the app will not send it again), and a result
 * message waiting in an app's queue (the outbox marked it sent when it was confirmed).
 * Without it, `planrun up` killed with SIGKILL lost both.
 *
 * The writes of one turn of the event loop share one transaction (one fsync), and a
 * publish is confirmed only after the COMMIT that stored it, so a confirmed message is on
 * disk. An ack deletes the row; a message acked before its row was written is never
 * written. RPC requests are not stored: their reply address lives in the broker's memory,
 * so after a restart nobody could receive the answer.
 */
import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { BrokerError } from './broker.js';

/** A stored message as it comes back at startup. */
export interface RestoredMessage {
  queue: string;
  seq: number;
  body: Buffer;
  routingKey: string;
  messageId: string | undefined;
  correlationId: string | undefined;
  headers: Record<string, unknown>;
  expiresAt: number | undefined;
}

export interface RestoredState {
  queues: string[];
  exchanges: string[];
  bindings: Array<{ exchange: string; queue: string; pattern: string }>;
  /** In arrival order. */
  messages: RestoredMessage[];
}

export type MessageToStore = Omit<RestoredMessage, 'queue'>;

const schemaVersion = 1;

const schema = `
  CREATE TABLE IF NOT EXISTS queues (name TEXT PRIMARY KEY) WITHOUT ROWID;
  CREATE TABLE IF NOT EXISTS exchanges (name TEXT PRIMARY KEY) WITHOUT ROWID;
  CREATE TABLE IF NOT EXISTS bindings (
    exchange TEXT NOT NULL, queue TEXT NOT NULL, pattern TEXT NOT NULL,
    PRIMARY KEY (exchange, queue, pattern)) WITHOUT ROWID;
  CREATE TABLE IF NOT EXISTS messages (
    seq INTEGER NOT NULL, queue TEXT NOT NULL, body BLOB NOT NULL, routing_key TEXT NOT NULL,
    message_id TEXT, correlation_id TEXT, headers TEXT NOT NULL, expires_at INTEGER,
    PRIMARY KEY (queue, seq));
`;

type Write = () => void;

export class EmbeddedBrokerStore {
  private readonly writes: Array<Write | undefined> = [];
  /** Message rows waiting for the next COMMIT, by queue and seq, so an ack can cancel the insert. */
  private readonly unwritten = new Map<string, number>();
  private batch: { promise: Promise<void>; resolve: () => void; reject: (error: unknown) => void } | undefined;
  private scheduled: NodeJS.Immediate | undefined;
  private closed = false;
  private readonly statements;

  private constructor(
    readonly file: string,
    private readonly db: Database.Database,
  ) {
    this.statements = {
      insertQueue: db.prepare('INSERT OR IGNORE INTO queues (name) VALUES (?)'),
      deleteQueue: db.prepare('DELETE FROM queues WHERE name = ?'),
      deleteQueueMessages: db.prepare('DELETE FROM messages WHERE queue = ?'),
      deleteQueueBindings: db.prepare('DELETE FROM bindings WHERE queue = ?'),
      insertExchange: db.prepare('INSERT OR IGNORE INTO exchanges (name) VALUES (?)'),
      deleteExchange: db.prepare('DELETE FROM exchanges WHERE name = ?'),
      deleteExchangeBindings: db.prepare('DELETE FROM bindings WHERE exchange = ?'),
      insertBinding: db.prepare('INSERT OR IGNORE INTO bindings (exchange, queue, pattern) VALUES (?, ?, ?)'),
      insertMessage: db.prepare(
        `INSERT OR REPLACE INTO messages (seq, queue, body, routing_key, message_id, correlation_id, headers, expires_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      deleteMessage: db.prepare('DELETE FROM messages WHERE queue = ? AND seq = ?'),
    };
  }

  /** Opens (creating if needed) the store at `path`; any failure names the file. */
  static open(path: string): EmbeddedBrokerStore {
    const file = resolve(path);
    let db: Database.Database | undefined;
    try {
      mkdirSync(dirname(file), { recursive: true });
      db = new Database(file);
      db.pragma('busy_timeout = 5000');
      db.pragma('journal_mode = WAL');
      db.pragma('synchronous = FULL');
      const version = db.pragma('user_version', { simple: true }) as number;
      if (version > schemaVersion) {
        throw new Error(`it is at schema version ${version}, newer than this planrun knows (${schemaVersion}); upgrade planrun`);
      }
      db.exec(schema);
      db.pragma(`user_version = ${schemaVersion}`);
      return new EmbeddedBrokerStore(file, db);
    } catch (error) {
      db?.close();
      const detail = error instanceof Error ? error.message : String(error);
      throw new Error(`cannot open the embedded broker's store ${file}: ${detail}`, { cause: error });
    }
  }

  /** Everything stored, for the broker to start from. */
  load(): RestoredState {
    const rows = this.db
      .prepare('SELECT seq, queue, body, routing_key, message_id, correlation_id, headers, expires_at FROM messages ORDER BY seq')
      .all() as Array<{
      seq: number;
      queue: string;
      body: Buffer;
      routing_key: string;
      message_id: string | null;
      correlation_id: string | null;
      headers: string;
      expires_at: number | null;
    }>;
    return {
      queues: (this.db.prepare('SELECT name FROM queues').all() as Array<{ name: string }>).map((row) => row.name),
      exchanges: (this.db.prepare('SELECT name FROM exchanges').all() as Array<{ name: string }>).map((row) => row.name),
      bindings: this.db.prepare('SELECT exchange, queue, pattern FROM bindings').all() as RestoredState['bindings'],
      messages: rows.map((row) => ({
        queue: row.queue,
        seq: row.seq,
        body: row.body,
        routingKey: row.routing_key,
        messageId: row.message_id ?? undefined,
        correlationId: row.correlation_id ?? undefined,
        headers: JSON.parse(row.headers) as Record<string, unknown>,
        expiresAt: row.expires_at ?? undefined,
      })),
    };
  }

  declareQueue(name: string): void {
    this.write(() => this.statements.insertQueue.run(name));
  }

  deleteQueue(name: string): void {
    this.write(() => {
      this.statements.deleteQueueMessages.run(name);
      this.statements.deleteQueueBindings.run(name);
      this.statements.deleteQueue.run(name);
    });
  }

  declareExchange(name: string): void {
    this.write(() => this.statements.insertExchange.run(name));
  }

  deleteExchange(name: string): void {
    this.write(() => {
      this.statements.deleteExchangeBindings.run(name);
      this.statements.deleteExchange.run(name);
    });
  }

  bind(exchange: string, queue: string, pattern: string): void {
    this.write(() => this.statements.insertBinding.run(exchange, queue, pattern));
  }

  addMessage(queue: string, message: MessageToStore): void {
    const index = this.write(() =>
      this.statements.insertMessage.run(
        message.seq,
        queue,
        message.body,
        message.routingKey,
        message.messageId ?? null,
        message.correlationId ?? null,
        JSON.stringify(message.headers),
        message.expiresAt ?? null,
      ),
    );
    this.unwritten.set(messageKey(queue, message.seq), index);
  }

  /** The message left the queue for good (acked, dropped or expired). */
  removeMessage(queue: string, seq: number): void {
    const key = messageKey(queue, seq);
    const index = this.unwritten.get(key);
    if (index !== undefined) {
      this.writes[index] = undefined;
      this.unwritten.delete(key);
      return;
    }
    this.write(() => this.statements.deleteMessage.run(queue, seq));
  }

  /** Resolves once every change made so far is on disk; rejects if the COMMIT that carried it failed. */
  durable(): Promise<void> {
    return this.batch?.promise ?? Promise.resolve();
  }

  /** Writes what is waiting, then closes the file. */
  close(): void {
    if (this.closed) return;
    if (this.scheduled) clearImmediate(this.scheduled);
    this.commit();
    this.closed = true;
    this.db.close();
  }

  private write(change: Write): number {
    if (this.closed) throw new BrokerError('closed', 'the embedded broker is closed');
    if (!this.batch) {
      let resolveBatch!: () => void;
      let rejectBatch!: (error: unknown) => void;
      const promise = new Promise<void>((res, rej) => {
        resolveBatch = res;
        rejectBatch = rej;
      });
      // Nobody may be waiting on a batch (acks only): its failure is reported to the next durable() caller anyway.
      promise.catch(() => undefined);
      this.batch = { promise, resolve: resolveBatch, reject: rejectBatch };
      this.scheduled = setImmediate(() => this.commit());
    }
    this.writes.push(change);
    return this.writes.length - 1;
  }

  private commit(): void {
    this.scheduled = undefined;
    const batch = this.batch;
    if (!batch) return;
    const writes = this.writes.splice(0);
    this.batch = undefined;
    this.unwritten.clear();
    try {
      this.db
        .transaction(() => {
          for (const change of writes) change?.();
        })
        .immediate();
    } catch (error) {
      const detail = error instanceof Error ? error.message : String(error);
      batch.reject(new BrokerError('publish_nacked', `the embedded broker could not store the change in ${this.file}: ${detail}`, { cause: error }));
      return;
    }
    batch.resolve();
  }
}

function messageKey(queue: string, seq: number): string {
  return `${queue}\u0000${seq}`;
}
