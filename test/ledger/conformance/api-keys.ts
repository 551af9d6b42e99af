/** Ledger conformance: API keys (issue 12), kept as digests, shared by every orchestrator on the ledger. */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';

import type { NewApiKey, StoredApiKey } from '../../../src/ledger/ledger.js';
import { expectLedgerError } from '../testing.js';
import type { Run } from './helpers.js';

const digest = (key: string): string => createHash('sha256').update(key).digest('hex');

function newKey(id: string, overrides: Partial<NewApiKey> = {}): NewApiKey {
  return { id, kind: 'tenant', tenant: 'acme', keySha256: digest(id), prefix: `prk_${id}`, ...overrides };
}

function stored(id: string, overrides: Partial<StoredApiKey> = {}): StoredApiKey {
  return {
    id,
    kind: 'tenant',
    tenant: 'acme',
    keySha256: digest(id),
    prefix: `prk_${id}`,
    createdAt: 1_000,
    lastUsedAt: undefined,
    revokedAt: undefined,
    ...overrides,
  };
}

export function apiKeysConformance(run: Run): void {
  describe('API keys', () => {
    it('createApiKey records a tenant or admin key created now; findApiKey tells who its digest acts for; listApiKeys lists every key', () =>
      run(async ({ ledger, clock }) => {
        const created = await ledger.createApiKey(newKey('k1'));
        assert.deepEqual(created, {
          id: 'k1',
          kind: 'tenant',
          tenant: 'acme',
          prefix: 'prk_k1',
          createdAt: clock.now(),
          lastUsedAt: undefined,
          revokedAt: undefined,
        });
        clock.advance(10);
        const admin = await ledger.createApiKey({ id: 'k2', kind: 'admin', keySha256: digest('k2'), prefix: 'prk_k2' });
        assert.equal(admin.tenant, undefined);
        assert.deepEqual(await ledger.findApiKey(digest('k1')), { id: 'k1', kind: 'tenant', tenant: 'acme' });
        assert.deepEqual(await ledger.findApiKey(digest('k2')), { id: 'k2', kind: 'admin' });
        assert.equal(await ledger.findApiKey(digest('nobody')), undefined);
        assert.equal(await ledger.findApiKey('not a digest'), undefined);
        assert.deepEqual(await ledger.listApiKeys(), [created, admin]);
      }));

    it('revokeApiKey: the key is refused from then on and stays listed; a second revoke and an unknown id say so', () =>
      run(async ({ ledger, clock }) => {
        await ledger.createApiKey(newKey('k1'));
        await ledger.createApiKey(newKey('k2'));
        clock.advance(5_000);
        assert.equal(await ledger.revokeApiKey('k1'), 'revoked');
        assert.equal(await ledger.revokeApiKey('k1'), 'already_revoked');
        assert.equal(await ledger.revokeApiKey('nope'), 'unknown');
        assert.equal(await ledger.findApiKey(digest('k1')), undefined);
        assert.equal(await ledger.isApiKeyActive('k1'), false);
        assert.equal(await ledger.isApiKeyActive('k2'), true);
        assert.equal(await ledger.isApiKeyActive('nope'), false);
        assert.deepEqual(
          (await ledger.listApiKeys()).map((k) => [k.id, k.revokedAt]),
          [
            ['k1', clock.now()],
            ['k2', undefined],
          ],
        );
      }));

    it('recordApiKeyUse moves the last use forward to now, never back', () =>
      run(async ({ ledger, clock }) => {
        await ledger.createApiKey(newKey('k1'));
        clock.advance(1_000);
        await ledger.recordApiKeyUse('k1');
        const first = clock.now();
        assert.equal((await ledger.listApiKeys())[0]!.lastUsedAt, first);
        clock.set(first - 500);
        await ledger.recordApiKeyUse('k1');
        assert.equal((await ledger.listApiKeys())[0]!.lastUsedAt, first, 'an earlier time does not move it back');
        await ledger.recordApiKeyUse('nope');
      }));

    it('a taken id or digest, an admin key naming a tenant, a tenant key naming none, a bad digest: refused, nothing recorded', () =>
      run(async ({ ledger }) => {
        await ledger.createApiKey(newKey('k1'));
        await assert.rejects(ledger.createApiKey(newKey('k1', { keySha256: digest('other') })));
        await assert.rejects(ledger.createApiKey(newKey('k9', { keySha256: digest('k1') })));
        await expectLedgerError(ledger.createApiKey(newKey('k3', { kind: 'admin' })), 'invalid_input', 'an admin key with a tenant');
        const { tenant: _tenant, ...noTenant } = newKey('k4');
        await expectLedgerError(ledger.createApiKey(noTenant), 'invalid_input', 'a tenant key without a tenant');
        await expectLedgerError(ledger.createApiKey(newKey('k5', { keySha256: 'ABC' })), 'invalid_input', 'a digest that is no SHA-256');
        await expectLedgerError(ledger.createApiKey(newKey('k6', { tenant: 'a\u0000b' })), 'invalid_input', 'a NUL in the tenant');
        assert.deepEqual(
          (await ledger.listApiKeys()).map((k) => k.id),
          ['k1'],
        );
      }));

    it('importApiKeys adds keys as they were; keys whose id or digest the ledger has are left as it has them', () =>
      run(async ({ ledger }) => {
        await ledger.createApiKey(newKey('k1'));
        await ledger.revokeApiKey('k1');
        const keys = [
          stored('k1'),
          stored('k2', { lastUsedAt: 2_000 }),
          stored('k3', { kind: 'admin', tenant: undefined, revokedAt: 3_000 }),
          stored('k4', { keySha256: digest('k2') }),
        ];
        assert.equal(await ledger.importApiKeys(keys), 2);
        assert.equal(await ledger.findApiKey(digest('k1')), undefined, 'k1 stays revoked');
        const listed = await ledger.listApiKeys();
        assert.deepEqual(
          listed.filter((k) => k.id !== 'k1'),
          [
            { id: 'k2', kind: 'tenant', tenant: 'acme', prefix: 'prk_k2', createdAt: 1_000, lastUsedAt: 2_000, revokedAt: undefined },
            { id: 'k3', kind: 'admin', tenant: undefined, prefix: 'prk_k3', createdAt: 1_000, lastUsedAt: undefined, revokedAt: 3_000 },
          ],
        );
        assert.equal(await ledger.importApiKeys(keys), 0, 'importing again adds nothing');
        assert.deepEqual(await ledger.listApiKeys(), listed);
      }));
  });
}
