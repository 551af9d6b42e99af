import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { type Clock, systemClock } from '../core/clock.js';
import { displayPrefix, generateApiKey, hashApiKey, looksLikeApiKey } from './api-key.js';
import { tenantNameProblem } from './tenant-name.js';

/** A key as listings show it: never the key itself, which only its creator ever sees. */
export interface ApiKeyRecord {
  /** Names the key for `revoke`. */
  id: string;
  tenant: string;
  /** The first characters of the key. */
  prefix: string;
  createdAt: number;
}

export interface CreatedApiKey extends ApiKeyRecord {
  /** The plain key: returned once, by `create`, and stored nowhere. */
  key: string;
}

export class KeyStoreError extends Error {
  override readonly name = 'KeyStoreError';
}

const schema = `CREATE TABLE IF NOT EXISTS api_keys (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    key_sha256 TEXT NOT NULL UNIQUE,
    prefix TEXT NOT NULL,
    created_at INTEGER NOT NULL
  ) STRICT`;

interface KeyRow {
  id: string;
  tenant: string;
  prefix: string;
  created_at: number;
}

/**
 * API keys per tenant, kept hashed in `keys.db` in the data dir. A file of its own rather
 * than a table of the ledger: keys are managed by `planrun keys` while the orchestrator
 * runs, and the ledger's schema stays about jobs.
 */
export class KeyStore {
  private constructor(
    private readonly db: Database.Database,
    private readonly clock: Clock,
  ) {}

  /** Opens (creating if needed) `<dataDir>/keys.db`, with the same durability as the ledger. */
  static open(dataDir: string, options: { clock?: Clock } = {}): KeyStore {
    const file = resolve(join(dataDir, 'keys.db'));
    let db: Database.Database | undefined;
    try {
      mkdirSync(dataDir, { recursive: true });
      db = new Database(file);
      db.pragma('busy_timeout = 5000');
      db.pragma('journal_mode = WAL');
      db.pragma('synchronous = FULL');
      db.exec(schema);
      return new KeyStore(db, options.clock ?? systemClock);
    } catch (error) {
      db?.close();
      throw new KeyStoreError(`cannot open key store ${file}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
    }
  }

  /** Makes a key for `tenant` and returns it with its record; the plain key is not kept. */
  create(tenant: string): CreatedApiKey {
    const problem = tenantNameProblem(tenant);
    if (problem) throw new KeyStoreError(problem);
    const key = generateApiKey();
    const record: ApiKeyRecord = { id: randomBytes(6).toString('hex'), tenant, prefix: displayPrefix(key), createdAt: this.clock.now() };
    this.db
      .prepare('INSERT INTO api_keys (id, tenant, key_sha256, prefix, created_at) VALUES (?, ?, ?, ?, ?)')
      .run(record.id, record.tenant, hashApiKey(key), record.prefix, record.createdAt);
    return { ...record, key };
  }

  /**
   * The tenant a key belongs to, or undefined for anything else (unknown, revoked,
   * malformed): one answer for every wrong key, so a caller learns nothing from it. The
   * lookup is by hash, so no secret is ever compared byte by byte.
   */
  tenantOf(key: string): string | undefined {
    if (!looksLikeApiKey(key)) return undefined;
    const row = this.db.prepare('SELECT tenant FROM api_keys WHERE key_sha256 = ?').get(hashApiKey(key)) as { tenant: string } | undefined;
    return row?.tenant;
  }

  /** Every key, oldest first. */
  list(): ApiKeyRecord[] {
    const rows = this.db.prepare('SELECT id, tenant, prefix, created_at FROM api_keys ORDER BY created_at, id').all() as KeyRow[];
    return rows.map((row) => ({ id: row.id, tenant: row.tenant, prefix: row.prefix, createdAt: row.created_at }));
  }

  /** Deletes a key: requests bearing it are refused from then on. False when no key has that id. */
  revoke(id: string): boolean {
    return this.db.prepare('DELETE FROM api_keys WHERE id = ?').run(id).changes === 1;
  }

  close(): void {
    this.db.close();
  }
}
