/**
 * API keys in the ledger (issue 12), so that every orchestrator sharing it accepts the same
 * keys and refuses a revoked one at its next request. The ledger keeps each key's SHA-256
 * digest; the key itself never reaches it (src/keys makes keys and digests).
 *
 *   createApiKey(new key)    -> its record, created now
 *   findApiKey(digest)       -> who a working key acts for, or undefined
 *   isApiKeyActive(id)       -> whether the key exists unrevoked
 *   listApiKeys()            -> every key, oldest first
 *   revokeApiKey(id)         -> revoked now | already_revoked | unknown
 *   recordApiKeyUse(id)      -> its last use moved forward to now
 *   importApiKeys(keys)      -> keys kept elsewhere added as they were; ones the ledger has, left alone
 */
import { LedgerError, LedgerErrorCode } from '../errors.js';
import type { ApiKeyRecord, KeyIdentity, NewApiKey, RevokeOutcome, StoredApiKey } from '../ledger.js';
import { run, type OperationEnv, type Plan } from './plan.js';

const SHA256_HEX = /^[0-9a-f]{64}$/;

export function* createApiKey(params: NewApiKey, { now }: OperationEnv): Plan<ApiKeyRecord> {
  const key = validKey({ ...params, createdAt: now, lastUsedAt: undefined, revokedAt: undefined, tenant: params.tenant });
  yield* run('insertApiKey', { key });
  return recordOf(key);
}

export function* findApiKey(keySha256: string): Plan<KeyIdentity | undefined> {
  if (typeof keySha256 !== 'string' || !SHA256_HEX.test(keySha256)) return undefined;
  return yield* run('selectWorkingApiKey', { keySha256 });
}

export function* isApiKeyActive(id: string): Plan<boolean> {
  const key = yield* run('selectApiKey', { id });
  return key !== undefined && key.revokedAt === undefined;
}

export function* listApiKeys(): Plan<ApiKeyRecord[]> {
  return yield* run('selectApiKeys', {});
}

export function* revokeApiKey(id: string, { now }: OperationEnv): Plan<RevokeOutcome> {
  const key = yield* run('selectApiKey', { id });
  if (key === undefined) return 'unknown';
  if (key.revokedAt !== undefined) return 'already_revoked';
  return (yield* run('revokeApiKey', { id, now })) ? 'revoked' : 'already_revoked';
}

export function* recordApiKeyUse(id: string, { now }: OperationEnv): Plan<void> {
  yield* run('touchApiKey', { id, now });
}

export function* importApiKeys(keys: readonly StoredApiKey[]): Plan<number> {
  let added = 0;
  for (const key of keys.map(validKey)) if (yield* run('insertApiKeyUnlessKnown', { key })) added += 1;
  return added;
}

/** A key as the statements write it; refuses what the table could not hold. */
function validKey(key: StoredApiKey): StoredApiKey {
  const invalid = (message: string) => new LedgerError(LedgerErrorCode.invalidInput, message);
  if (typeof key.id !== 'string' || key.id.length === 0 || key.id.includes('\u0000')) throw invalid('an API key id must be a non-empty string without NUL');
  if (key.kind !== 'tenant' && key.kind !== 'admin') throw invalid(`an API key's kind must be "tenant" or "admin", got ${JSON.stringify(key.kind)}`);
  if (key.kind === 'tenant' && (typeof key.tenant !== 'string' || key.tenant.length === 0 || key.tenant.includes('\u0000'))) {
    throw invalid('a tenant key needs its tenant: a non-empty string without NUL');
  }
  if (key.kind === 'admin' && key.tenant !== undefined) throw invalid('an admin key acts for every tenant: it names none');
  if (typeof key.keySha256 !== 'string' || !SHA256_HEX.test(key.keySha256)) throw invalid("an API key's digest must be 64 lower-case hex digits (SHA-256)");
  if (typeof key.prefix !== 'string' || key.prefix.includes('\u0000')) throw invalid("an API key's prefix must be a string without NUL");
  return key;
}

function recordOf({ keySha256: _digest, ...record }: StoredApiKey): ApiKeyRecord {
  return record;
}
