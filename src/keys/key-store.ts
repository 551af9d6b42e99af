import { randomBytes } from 'node:crypto';
import { type Clock, systemClock } from '../core/clock.js';
import type { ApiKeyKind, ApiKeyRecord, KeyIdentity, Ledger, RevokeOutcome } from '../ledger/ledger.js';
import { displayPrefix, generateApiKey, hashApiKey, looksLikeApiKey } from './api-key.js';
import { tenantNameProblem } from './tenant-name.js';

export type { ApiKeyKind, ApiKeyRecord, KeyIdentity, RevokeOutcome } from '../ledger/ledger.js';

export interface CreatedApiKey extends ApiKeyRecord {
  /** The plain key: returned once, by `create`, and stored nowhere. */
  key: string;
}

export class KeyStoreError extends Error {
  override readonly name = 'KeyStoreError';
}

/**
 * How stale a key's recorded last use may be. Recording every request would make each
 * one a ledger write; a minute is precise enough to tell a dead key from a live one.
 */
export const lastUsedResolutionMs = 60_000;

export interface KeyStoreOptions {
  /** Times the recording of last uses (default: the system clock); the ledger's clock stamps them. */
  clock?: Clock;
  /**
   * Hears of a key's last use that could not be written (the ledger busy or unreachable):
   * the request it came with goes on, and the next one tries again.
   */
  onUseNotRecorded?: (error: unknown) => void;
}

/**
 * API keys, kept hashed in the ledger (issue 12): every orchestrator on the same ledger
 * accepts the same keys. Every lookup reads the ledger, nothing is cached, so a key
 * revoked through any orchestrator or `planrun keys revoke` is refused by every
 * orchestrator at its next request. The ledger never sees a key, only its SHA-256 digest.
 */
export class KeyStore {
  /** When this process last recorded each key's use. */
  private readonly usesRecordedAt = new Map<string, number>();
  private readonly clock: Clock;
  private readonly onUseNotRecorded: (error: unknown) => void;

  constructor(
    private readonly ledger: Ledger,
    options: KeyStoreOptions = {},
  ) {
    this.clock = options.clock ?? systemClock;
    this.onUseNotRecorded = options.onUseNotRecorded ?? (() => undefined);
  }

  /** Makes a key for `tenant` and returns it with its record; the plain key is not kept. */
  async create(tenant: string): Promise<CreatedApiKey> {
    const problem = tenantNameProblem(tenant);
    if (problem) throw new KeyStoreError(problem);
    return this.insert('tenant', tenant);
  }

  /** Makes an admin key: it sees and acts on every tenant's jobs. */
  createAdmin(): Promise<CreatedApiKey> {
    return this.insert('admin', undefined);
  }

  /**
   * Who a key acts for, or undefined for anything else (unknown, revoked, malformed): one
   * answer for every wrong key, so a caller learns nothing from it. The lookup is by hash,
   * so no secret is ever compared byte by byte. Records the key's use, at most once per
   * `lastUsedResolutionMs` per key and process.
   */
  async identify(key: string): Promise<KeyIdentity | undefined> {
    if (!looksLikeApiKey(key)) return undefined;
    const identity = await this.ledger.findApiKey(hashApiKey(key));
    if (identity) await this.recordUse(identity.id);
    return identity;
  }

  /** The tenant a working tenant key acts for; undefined for an admin key and any wrong key. */
  async tenantOf(key: string): Promise<string | undefined> {
    const identity = await this.identify(key);
    return identity?.kind === 'tenant' ? identity.tenant : undefined;
  }

  /** Whether the key with this id still works (not revoked). */
  isActive(id: string): Promise<boolean> {
    return this.ledger.isApiKeyActive(id);
  }

  /** Every key, revoked ones included, oldest first. */
  list(): Promise<ApiKeyRecord[]> {
    return this.ledger.listApiKeys();
  }

  /** Revokes a key: requests bearing it are refused from then on. It stays listed, as revoked. */
  revoke(id: string): Promise<RevokeOutcome> {
    return this.ledger.revokeApiKey(id);
  }

  private async insert(kind: ApiKeyKind, tenant: string | undefined): Promise<CreatedApiKey> {
    const key = generateApiKey();
    const record = await this.ledger.createApiKey({
      id: randomBytes(6).toString('hex'),
      kind,
      ...(tenant === undefined ? {} : { tenant }),
      keySha256: hashApiKey(key),
      prefix: displayPrefix(key),
    });
    return { ...record, key };
  }

  private async recordUse(id: string): Promise<void> {
    const now = this.clock.now();
    const recorded = this.usesRecordedAt.get(id);
    if (recorded !== undefined && now - recorded < lastUsedResolutionMs) return;
    try {
      await this.ledger.recordApiKeyUse(id);
      this.usesRecordedAt.set(id, now);
    } catch (error) {
      // Only bookkeeping: the request the key came with must not fail for it.
      this.onUseNotRecorded(error);
    }
  }
}
