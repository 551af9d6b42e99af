import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { type Clock, systemClock } from '../core/clock.js';
import { displayPrefix, generateApiKey, hashApiKey, looksLikeApiKey } from './api-key.js';
import { tenantNameProblem } from './tenant-name.js';

/** A tenant key acts for its one tenant; an admin key for every tenant (the dashboard, redrive). */
export type ApiKeyKind = 'tenant' | 'admin';

/** Who a key acts for: what the API needs to know of a request's key. */
export type KeyIdentity = { id: string; kind: 'tenant'; tenant: string } | { id: string; kind: 'admin' };

/** A key as listings show it: never the key itself, which only its creator ever sees. */
export interface ApiKeyRecord {
  /** Names the key for `revoke`. */
  id: string;
  kind: ApiKeyKind;
  /** The tenant a tenant key acts for; undefined for an admin key. */
  tenant: string | undefined;
  /** The first characters of the key. */
  prefix: string;
  createdAt: number;
  /** When a request last bore the key, to within `lastUsedResolutionMs`; undefined if never. */
  lastUsedAt: number | undefined;
  /** When it was revoked; undefined while it works. */
  revokedAt: number | undefined;
}

export interface CreatedApiKey extends ApiKeyRecord {
  /** The plain key: returned once, by `create`, and stored nowhere. */
  key: string;
}

export class KeyStoreError extends Error {
  override readonly name = 'KeyStoreError';
}

/**
 * How stale a key's recorded last use may be. Recording every request would make each
 * one a write to keys.db; a minute is precise enough to tell a dead key from a live one.
 */
export const lastUsedResolutionMs = 60_000;

/**
 * The schema, one step per `user_version`. Each step only adds, so a keys.db made by an
 * older planrun opens as it was (its keys are tenant keys, never used, not revoked).
 * Admin keys keep `tenant` empty: the column predates them and stays NOT NULL.
 */
const schemaSteps = [
  `CREATE TABLE IF NOT EXISTS api_keys (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    key_sha256 TEXT NOT NULL UNIQUE,
    prefix TEXT NOT NULL,
    created_at INTEGER NOT NULL
  ) STRICT`,
  `ALTER TABLE api_keys ADD COLUMN kind TEXT NOT NULL DEFAULT 'tenant' CHECK (kind IN ('tenant', 'admin'));
   ALTER TABLE api_keys ADD COLUMN last_used_at INTEGER;
   ALTER TABLE api_keys ADD COLUMN revoked_at INTEGER;`,
];

interface KeyRow {
  id: string;
  kind: ApiKeyKind;
  tenant: string;
  prefix: string;
  created_at: number;
  last_used_at: number | null;
  revoked_at: number | null;
}

export type RevokeOutcome = 'revoked' | 'already_revoked' | 'unknown';

/**
 * API keys, kept hashed in `keys.db` in the data dir. A file of its own rather
 * than a table of the ledger: keys are managed by `planrun keys` while the orchestrator
 * runs, and the ledger's schema stays about jobs. Every lookup reads the file, so a key
 * revoked by `planrun keys revoke` is refused by a running orchestrator at its next request.
 */
export class KeyStore {
  /** When this process last recorded each key's use. */
  private readonly usesRecordedAt = new Map<string, number>();

  private constructor(
    private readonly db: Database.Database,
    private readonly clock: Clock,
    private readonly onUseNotRecorded: (error: unknown) => void,
  ) {}

  /**
   * Opens (creating if needed) `<dataDir>/keys.db`, with the same durability as the ledger.
   * `onUseNotRecorded` hears of a key's last use that could not be written (the file busy
   * or read-only): the request it came with goes on, and the next one tries again.
   */
  static open(dataDir: string, options: { clock?: Clock; onUseNotRecorded?: (error: unknown) => void } = {}): KeyStore {
    const file = resolve(join(dataDir, 'keys.db'));
    let db: Database.Database | undefined;
    try {
      mkdirSync(dataDir, { recursive: true });
      db = new Database(file);
      db.pragma('busy_timeout = 5000');
      db.pragma('journal_mode = WAL');
      db.pragma('synchronous = FULL');
      migrate(db);
      return new KeyStore(db, options.clock ?? systemClock, options.onUseNotRecorded ?? (() => undefined));
    } catch (error) {
      db?.close();
      throw new KeyStoreError(`cannot open key store ${file}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
    }
  }

  /** Makes a key for `tenant` and returns it with its record; the plain key is not kept. */
  create(tenant: string): CreatedApiKey {
    const problem = tenantNameProblem(tenant);
    if (problem) throw new KeyStoreError(problem);
    return this.insert('tenant', tenant);
  }

  /** Makes an admin key: it sees and acts on every tenant's jobs. */
  createAdmin(): CreatedApiKey {
    return this.insert('admin', undefined);
  }

  /**
   * Who a key acts for, or undefined for anything else (unknown, revoked, malformed): one
   * answer for every wrong key, so a caller learns nothing from it. The lookup is by hash,
   * so no secret is ever compared byte by byte. Records the key's use, at most once per
   * `lastUsedResolutionMs` per key and process.
   */
  identify(key: string): KeyIdentity | undefined {
    if (!looksLikeApiKey(key)) return undefined;
    const row = this.db.prepare('SELECT id, kind, tenant FROM api_keys WHERE key_sha256 = ? AND revoked_at IS NULL').get(hashApiKey(key)) as
      Pick<KeyRow, 'id' | 'kind' | 'tenant'> | undefined;
    if (!row) return undefined;
    this.recordUse(row.id);
    return row.kind === 'admin' ? { id: row.id, kind: 'admin' } : { id: row.id, kind: 'tenant', tenant: row.tenant };
  }

  /** The tenant a working tenant key acts for; undefined for an admin key and any wrong key. */
  tenantOf(key: string): string | undefined {
    const identity = this.identify(key);
    return identity?.kind === 'tenant' ? identity.tenant : undefined;
  }

  /** Whether the key with this id still works (not revoked, not deleted). */
  isActive(id: string): boolean {
    return this.db.prepare('SELECT 1 FROM api_keys WHERE id = ? AND revoked_at IS NULL').get(id) !== undefined;
  }

  /** Every key, revoked ones included, oldest first. */
  list(): ApiKeyRecord[] {
    const rows = this.db
      .prepare('SELECT id, kind, tenant, prefix, created_at, last_used_at, revoked_at FROM api_keys ORDER BY created_at, id')
      .all() as KeyRow[];
    return rows.map(toRecord);
  }

  /** Revokes a key: requests bearing it are refused from then on. It stays listed, as revoked. */
  revoke(id: string): RevokeOutcome {
    if (this.db.prepare('UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL').run(this.clock.now(), id).changes === 1) {
      return 'revoked';
    }
    return this.db.prepare('SELECT 1 FROM api_keys WHERE id = ?').get(id) === undefined ? 'unknown' : 'already_revoked';
  }

  close(): void {
    this.db.close();
  }

  private insert(kind: ApiKeyKind, tenant: string | undefined): CreatedApiKey {
    const key = generateApiKey();
    const record: ApiKeyRecord = {
      id: randomBytes(6).toString('hex'),
      kind,
      tenant,
      prefix: displayPrefix(key),
      createdAt: this.clock.now(),
      lastUsedAt: undefined,
      revokedAt: undefined,
    };
    this.db
      .prepare('INSERT INTO api_keys (id, kind, tenant, key_sha256, prefix, created_at) VALUES (?, ?, ?, ?, ?, ?)')
      .run(record.id, kind, tenant ?? '', hashApiKey(key), record.prefix, record.createdAt);
    return { ...record, key };
  }

  private recordUse(id: string): void {
    const now = this.clock.now();
    const recorded = this.usesRecordedAt.get(id);
    if (recorded !== undefined && now - recorded < lastUsedResolutionMs) return;
    try {
      this.db.prepare('UPDATE api_keys SET last_used_at = max(coalesce(last_used_at, 0), ?) WHERE id = ?').run(now, id);
      this.usesRecordedAt.set(id, now);
    } catch (error) {
      // Only bookkeeping: the request the key came with must not fail for it.
      this.onUseNotRecorded(error);
    }
  }
}

function migrate(db: Database.Database): void {
  const version = db.pragma('user_version', { simple: true }) as number;
  if (version > schemaSteps.length) {
    throw new KeyStoreError(`it was made by a newer planrun (key store version ${version}; this one knows up to ${schemaSteps.length})`);
  }
  // A keys.db from before versioning has the table and version 0: its first step is a no-op.
  db.transaction(() => {
    for (const step of schemaSteps.slice(version)) db.exec(step);
    db.pragma(`user_version = ${schemaSteps.length}`);
  }).immediate();
}

function toRecord(row: KeyRow): ApiKeyRecord {
  return {
    id: row.id,
    kind: row.kind,
    tenant: row.kind === 'admin' ? undefined : row.tenant,
    prefix: row.prefix,
    createdAt: row.created_at,
    lastUsedAt: row.last_used_at ?? undefined,
    revokedAt: row.revoked_at ?? undefined,
  };
}
