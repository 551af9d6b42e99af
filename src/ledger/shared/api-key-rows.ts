/**
 * A row of `api_keys` (migration 9), as both drivers return it (times as numbers: SQLite's
 * integers, PostgreSQL's bigints parsed by the pool), and its conversion to the Ledger's types.
 */
import type { ApiKeyKind, ApiKeyRecord, KeyIdentity, StoredApiKey } from '../ledger.js';

export interface ApiKeyRow {
  id: string;
  kind: ApiKeyKind;
  /** NULL for an admin key. */
  tenant: string | null;
  prefix: string;
  created_at: number;
  last_used_at: number | null;
  revoked_at: number | null;
}

/** The columns a listing reads, in the order of ApiKeyRow. */
export const apiKeyColumns = 'id, kind, tenant, prefix, created_at, last_used_at, revoked_at';

export function toApiKeyRecord(row: ApiKeyRow): ApiKeyRecord {
  return {
    id: row.id,
    kind: row.kind,
    tenant: row.tenant ?? undefined,
    prefix: row.prefix,
    createdAt: row.created_at,
    lastUsedAt: row.last_used_at ?? undefined,
    revokedAt: row.revoked_at ?? undefined,
  };
}

export function toKeyIdentity(row: Pick<ApiKeyRow, 'id' | 'kind' | 'tenant'>): KeyIdentity {
  return row.kind === 'admin' || row.tenant === null ? { id: row.id, kind: 'admin' } : { id: row.id, kind: 'tenant', tenant: row.tenant };
}

/** The values of a key's row, in the order id, kind, tenant, key_sha256, prefix, created_at, last_used_at, revoked_at. */
export function apiKeyValues(key: StoredApiKey): [string, ApiKeyKind, string | null, string, string, number, number | null, number | null] {
  return [key.id, key.kind, key.tenant ?? null, key.keySha256, key.prefix, key.createdAt, key.lastUsedAt ?? null, key.revokedAt ?? null];
}
