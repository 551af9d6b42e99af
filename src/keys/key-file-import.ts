import { existsSync, renameSync } from 'node:fs';
import { join, resolve } from 'node:path';
import Database from 'better-sqlite3';
import type { ApiKeyKind, Ledger, StoredApiKey } from '../ledger/ledger.js';
import { KeyStoreError } from './key-store.js';

/** Where planrun before issue 12 kept the API keys: a SQLite file of the data dir. */
export const keyFileName = 'keys.db';

/** What the key file is renamed to once the ledger holds its keys, so it is imported only once. */
export const importedKeyFileName = 'keys.db.imported';

/** The newest keys.db schema (its `user_version`) an older planrun wrote. */
const lastKeyFileVersion = 2;

interface KeyFileRow {
  id: string;
  tenant: string;
  key_sha256: string;
  prefix: string;
  created_at: number;
  kind?: ApiKeyKind;
  last_used_at?: number | null;
  revoked_at?: number | null;
}

/**
 * Moves the keys of `<dataDir>/keys.db`, kept there by an older planrun, into the ledger:
 * each key as it was (tenant or admin, created, last used, revoked), then the file renamed
 * `keys.db.imported` (kept, for a downgrade). Run by the orchestrator at start-up and by
 * `planrun keys`, so an upgraded orchestrator accepts the keys it accepted before. A key
 * the ledger already has is left as the ledger has it, so an import interrupted before
 * the rename is simply done again. Answers how many keys were added, or undefined when
 * there is no key file.
 */
export async function importKeyFile(ledger: Ledger, dataDir: string): Promise<number | undefined> {
  const file = resolve(join(dataDir, keyFileName));
  if (!existsSync(file)) return undefined;
  const keys = readKeyFile(file);
  const added = await ledger.importApiKeys(keys);
  renameSync(file, join(dataDir, importedKeyFileName));
  return added;
}

function readKeyFile(file: string): StoredApiKey[] {
  let db: Database.Database | undefined;
  try {
    // Read-write, so that closing it folds a write-ahead log left behind into the file before the rename.
    db = new Database(file, { fileMustExist: true });
    db.pragma('busy_timeout = 5000');
    const version = db.pragma('user_version', { simple: true }) as number;
    if (version > lastKeyFileVersion) {
      throw new Error(`it was made by a newer planrun (key store version ${version}; this one imports up to ${lastKeyFileVersion})`);
    }
    const rows = db.prepare('SELECT * FROM api_keys ORDER BY created_at, id').all() as KeyFileRow[];
    return rows.map((row) => {
      // A file from before key kinds has only tenant keys; admin keys kept an empty tenant.
      const kind = row.kind ?? 'tenant';
      return {
        id: row.id,
        kind,
        tenant: kind === 'admin' ? undefined : row.tenant,
        keySha256: row.key_sha256,
        prefix: row.prefix,
        createdAt: row.created_at,
        lastUsedAt: row.last_used_at ?? undefined,
        revokedAt: row.revoked_at ?? undefined,
      };
    });
  } catch (error) {
    throw new KeyStoreError(`cannot import the API keys of ${file} into the ledger: ${error instanceof Error ? error.message : String(error)}`, {
      cause: error,
    });
  } finally {
    db?.close();
  }
}
