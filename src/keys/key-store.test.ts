import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { ManualClock } from '../core/clock.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { hashApiKey } from './api-key.js';
import { KeyStore, lastUsedResolutionMs } from './key-store.js';

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
      const unused = { kind: 'tenant', lastUsedAt: undefined, revokedAt: undefined };
      assert.deepEqual(store.list(), [
        { id: acme.id, tenant: 'acme', prefix: acme.key.slice(0, 12), createdAt: Date.UTC(2026, 4, 1), ...unused },
        { id: globex.id, tenant: 'globex', prefix: globex.key.slice(0, 12), createdAt: Date.UTC(2026, 4, 1) + 1000, ...unused },
      ]);
      // Neither the database nor its write-ahead log holds a key in the clear.
      const stored = ['keys.db', 'keys.db-wal'].map((file) => readFileSync(join(dir, file)).toString('latin1')).join('');
      assert.ok(!stored.includes(acme.key) && !stored.includes(globex.key));
      assert.ok(stored.includes(hashApiKey(acme.key)));
    }, clock);
  });

  it('revokes a key by id: its requests are refused from then on, other keys unaffected; it stays listed as revoked', () => {
    const clock = new ManualClock(Date.UTC(2026, 4, 1));
    withStore((store) => {
      const kept = store.create('acme');
      const revoked = store.create('acme');
      clock.advance(5000);
      assert.equal(store.revoke(revoked.id), 'revoked');
      assert.equal(store.revoke(revoked.id), 'already_revoked');
      assert.equal(store.revoke('nosuchkey'), 'unknown');
      assert.equal(store.tenantOf(revoked.key), undefined);
      assert.equal(store.identify(revoked.key), undefined);
      assert.equal(store.isActive(revoked.id), false);
      assert.equal(store.tenantOf(kept.key), 'acme');
      assert.equal(store.isActive(kept.id), true);
      assert.deepEqual(
        store.list().map((k) => [k.id, k.revokedAt]),
        [
          [kept.id, undefined],
          [revoked.id, Date.UTC(2026, 4, 1) + 5000],
        ].sort((a, b) => String(a[0]).localeCompare(String(b[0]))),
      );
    }, clock);
  });

  it('makes admin keys, which act for no one tenant and are listed as admin', () =>
    withStore((store) => {
      const admin = store.createAdmin();
      const tenant = store.create('acme');
      assert.match(admin.key, /^prk_[A-Za-z0-9_-]{43}$/);
      assert.deepEqual(store.identify(admin.key), { id: admin.id, kind: 'admin' });
      assert.deepEqual(store.identify(tenant.key), { id: tenant.id, kind: 'tenant', tenant: 'acme' });
      assert.equal(store.tenantOf(admin.key), undefined, 'an admin key is no tenant key');
      const listed = store.list().find((k) => k.id === admin.id)!;
      assert.equal(listed.kind, 'admin');
      assert.equal(listed.tenant, undefined);
      assert.equal(store.revoke(admin.id), 'revoked');
      assert.equal(store.identify(admin.key), undefined);
    }));

  it('records when a key was last used, at most once a minute per key', () => {
    const clock = new ManualClock(Date.UTC(2026, 4, 1));
    withStore((store) => {
      const { id, key } = store.create('acme');
      const lastUsed = (): number | undefined => store.list().find((k) => k.id === id)!.lastUsedAt;
      assert.equal(lastUsed(), undefined);
      store.identify(key);
      assert.equal(lastUsed(), Date.UTC(2026, 4, 1));
      // Within the resolution, uses are not written (a write would move the time on): the row keeps the first use.
      clock.advance(lastUsedResolutionMs - 1);
      for (let i = 0; i < 100; i++) store.identify(key);
      assert.equal(lastUsed(), Date.UTC(2026, 4, 1));
      clock.advance(1);
      store.identify(key);
      assert.equal(lastUsed(), Date.UTC(2026, 4, 1) + lastUsedResolutionMs);
    }, clock);
  });

  it('a last use that cannot be written is reported, the key still works, and the next use tries again', () => {
    const dir = tempDir('planrun-keys-');
    const failures: unknown[] = [];
    const store = KeyStore.open(dir.path, { onUseNotRecorded: (error) => failures.push(error) });
    const other = new Database(join(dir.path, 'keys.db'));
    try {
      const { id, key } = store.create('acme');
      other.exec("CREATE TRIGGER refuse BEFORE UPDATE ON api_keys BEGIN SELECT RAISE(ABORT, 'no writes now'); END");
      assert.deepEqual(store.identify(key), { id, kind: 'tenant', tenant: 'acme' });
      assert.equal(failures.length, 1);
      assert.match(String(failures[0]), /no writes now/);
      assert.equal(store.list()[0]!.lastUsedAt, undefined);
      other.exec('DROP TRIGGER refuse');
      store.identify(key);
      assert.notEqual(store.list()[0]!.lastUsedAt, undefined, 'recorded at the next use, not a minute later');
    } finally {
      other.close();
      store.close();
      dir.remove();
    }
  });

  it('opens a keys.db made before key kinds, revocation and last use: its keys keep working as tenant keys', () => {
    const dir = tempDir('planrun-keys-');
    try {
      const key = 'prk_' + 'a'.repeat(43);
      const old = new Database(join(dir.path, 'keys.db'));
      old.exec(`CREATE TABLE api_keys (
        id TEXT PRIMARY KEY, tenant TEXT NOT NULL, key_sha256 TEXT NOT NULL UNIQUE, prefix TEXT NOT NULL, created_at INTEGER NOT NULL
      ) STRICT`);
      old.prepare('INSERT INTO api_keys VALUES (?, ?, ?, ?, ?)').run('0123456789ab', 'acme', hashApiKey(key), key.slice(0, 12), 1000);
      old.close();
      const store = KeyStore.open(dir.path);
      try {
        assert.deepEqual(store.identify(key), { id: '0123456789ab', kind: 'tenant', tenant: 'acme' });
        assert.equal(store.list()[0]!.kind, 'tenant');
        assert.equal(store.revoke('0123456789ab'), 'revoked');
        assert.equal(store.tenantOf(key), undefined);
      } finally {
        store.close();
      }
      // Opened again, the upgraded file is not upgraded twice.
      KeyStore.open(dir.path).close();
    } finally {
      dir.remove();
    }
  });

  it('refuses a keys.db from a newer planrun rather than guess at its schema', () => {
    const dir = tempDir('planrun-keys-');
    try {
      KeyStore.open(dir.path).close();
      const db = new Database(join(dir.path, 'keys.db'));
      db.pragma('user_version = 99');
      db.close();
      assert.throws(() => KeyStore.open(dir.path), { name: 'KeyStoreError', message: /made by a newer planrun \(key store version 99/ });
    } finally {
      dir.remove();
    }
  });

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
