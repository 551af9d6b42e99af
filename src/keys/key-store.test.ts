import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ManualClock } from '../core/clock.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { hashApiKey } from './api-key.js';
import { KeyStore } from './key-store.js';

function withStore(body: (store: KeyStore, dir: string) => void, clock?: ManualClock): void {
  const dir = tempDir('planrun-keys-');
  const store = KeyStore.open(dir.path, { clock });
  try {
    body(store, dir.path);
  } finally {
    store.close();
    dir.remove();
  }
}

describe('the key store', () => {
  it('makes a prefixed 32-byte key per call and tells its tenant', () =>
    withStore((store) => {
      const first = store.create('acme');
      const second = store.create('acme');
      assert.match(first.key, /^prk_[A-Za-z0-9_-]{43}$/);
      assert.equal(Buffer.from(first.key.slice(4), 'base64url').length, 32);
      assert.notEqual(first.key, second.key);
      assert.notEqual(first.id, second.id);
      assert.equal(store.tenantOf(first.key), 'acme');
      assert.equal(store.tenantOf(second.key), 'acme');
    }));

  it('answers undefined for any key it did not issue, whatever its shape', () =>
    withStore((store) => {
      const { key } = store.create('acme');
      const flipped = key.slice(0, -1) + (key.endsWith('A') ? 'B' : 'A');
      for (const wrong of [flipped, `${key}x`, key.slice(0, -1), '', 'prk_', 'Bearer', "' OR 1=1 --"]) {
        assert.equal(store.tenantOf(wrong), undefined, JSON.stringify(wrong));
      }
    }));

  it('keeps only a hash of each key, and lists keys by id, tenant, prefix and creation time', () => {
    const clock = new ManualClock(Date.UTC(2026, 4, 1));
    withStore((store, dir) => {
      const acme = store.create('acme');
      clock.advance(1000);
      const globex = store.create('globex');
      assert.deepEqual(store.list(), [
        { id: acme.id, tenant: 'acme', prefix: acme.key.slice(0, 12), createdAt: Date.UTC(2026, 4, 1) },
        { id: globex.id, tenant: 'globex', prefix: globex.key.slice(0, 12), createdAt: Date.UTC(2026, 4, 1) + 1000 },
      ]);
      // Neither the database nor its write-ahead log holds a key in the clear.
      const stored = ['keys.db', 'keys.db-wal'].map((file) => readFileSync(join(dir, file)).toString('latin1')).join('');
      assert.ok(!stored.includes(acme.key) && !stored.includes(globex.key));
      assert.ok(stored.includes(hashApiKey(acme.key)));
    }, clock);
  });

  it('revokes a key by id: its requests are refused from then on, other keys unaffected', () =>
    withStore((store) => {
      const kept = store.create('acme');
      const revoked = store.create('acme');
      assert.equal(store.revoke(revoked.id), true);
      assert.equal(store.revoke(revoked.id), false);
      assert.equal(store.tenantOf(revoked.key), undefined);
      assert.equal(store.tenantOf(kept.key), 'acme');
      assert.deepEqual(
        store.list().map((k) => k.id),
        [kept.id],
      );
    }));

  it('refuses tenant names that could not be a routing-key word', () =>
    withStore((store) => {
      for (const name of ['', 'acme.eu', 'a b', 'a*', '#', '9lives', 'x'.repeat(65)]) {
        assert.throws(() => store.create(name), { name: 'KeyStoreError', message: /tenant name .* must start with a letter/ }, name);
      }
      assert.equal(store.create('Acme_EU-2').tenant, 'Acme_EU-2');
      assert.equal(store.list().length, 1);
    }));

  it('keeps keys across reopening, in keys.db in the data dir', () => {
    const dir = tempDir('planrun-keys-');
    try {
      const first = KeyStore.open(dir.path);
      const { key } = first.create('acme');
      first.close();
      const again = KeyStore.open(dir.path);
      assert.equal(again.tenantOf(key), 'acme');
      again.close();
    } finally {
      dir.remove();
    }
  });

  it('names the file when it cannot open the store', () => {
    const dir = tempDir('planrun-keys-');
    try {
      // A data dir that is a file: nothing can be created inside it.
      KeyStore.open(dir.path).close();
      assert.throws(() => KeyStore.open(join(dir.path, 'keys.db')), { name: 'KeyStoreError', message: /cannot open key store .*keys\.db\/keys\.db/ });
    } finally {
      dir.remove();
    }
  });
});
