import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { ManualClock } from '../core/clock.js';
import type { Ledger } from '../ledger/ledger.js';
import { openSqliteLedger } from '../ledger/sqlite/sqlite-ledger.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { hashApiKey } from './api-key.js';
import { importKeyFile } from './key-file-import.js';
import { KeyStore, lastUsedResolutionMs } from './key-store.js';

const start = Date.UTC(2026, 4, 1);

async function withStore(body: (store: KeyStore, ledger: Ledger, dir: string) => Promise<void>, clock = new ManualClock(start)): Promise<void> {
  const dir = tempDir('planrun-keys-');
  const ledger = await openSqliteLedger({ path: join(dir.path, 'ledger.db'), clock });
  try {
    await body(new KeyStore(ledger, { clock }), ledger, dir.path);
  } finally {
    await ledger.close();
    dir.remove();
  }
}

/** A keys.db as planrun kept it before keys moved into the ledger (schema version 2: kinds, last use, revocation). */
function writeKeyFile(
  dir: string,
  rows: Array<[id: string, tenant: string, key: string, createdAt: number, kind: string, lastUsedAt: number | null, revokedAt: number | null]>,
): void {
  const db = new Database(join(dir, 'keys.db'));
  db.exec(`CREATE TABLE api_keys (
    id TEXT PRIMARY KEY, tenant TEXT NOT NULL, key_sha256 TEXT NOT NULL UNIQUE, prefix TEXT NOT NULL, created_at INTEGER NOT NULL,
    kind TEXT NOT NULL DEFAULT 'tenant', last_used_at INTEGER, revoked_at INTEGER
  ) STRICT`);
  db.pragma('user_version = 2');
  const insert = db.prepare('INSERT INTO api_keys VALUES (?, ?, ?, ?, ?, ?, ?, ?)');
  for (const [id, tenant, key, createdAt, kind, lastUsedAt, revokedAt] of rows) {
    insert.run(id, tenant, hashApiKey(key), key.slice(0, 12), createdAt, kind, lastUsedAt, revokedAt);
  }
  db.close();
}

const keyOf = (letter: string): string => 'prk_' + letter.repeat(43);

describe('the key store', () => {
  it('makes a prefixed 32-byte key per call and tells its tenant', () =>
    withStore(async (store) => {
      const first = await store.create('acme');
      const second = await store.create('acme');
      assert.match(first.key, /^prk_[A-Za-z0-9_-]{43}$/);
      assert.equal(Buffer.from(first.key.slice(4), 'base64url').length, 32);
      assert.notEqual(first.key, second.key);
      assert.notEqual(first.id, second.id);
      assert.equal(await store.tenantOf(first.key), 'acme');
      assert.equal(await store.tenantOf(second.key), 'acme');
    }));

  it('answers undefined for any key it did not issue, whatever its shape', () =>
    withStore(async (store) => {
      const { key } = await store.create('acme');
      const flipped = key.slice(0, -1) + (key.endsWith('A') ? 'B' : 'A');
      for (const wrong of [flipped, `${key}x`, key.slice(0, -1), '', 'prk_', 'Bearer', "' OR 1=1 --"]) {
        assert.equal(await store.tenantOf(wrong), undefined, JSON.stringify(wrong));
      }
    }));

  it('keeps only a hash of each key in the ledger, and lists keys by id, tenant, prefix and creation time', () => {
    const clock = new ManualClock(start);
    return withStore(async (store, ledger, dir) => {
      const acme = await store.create('acme');
      clock.advance(1000);
      const globex = await store.create('globex');
      const unused = { kind: 'tenant', lastUsedAt: undefined, revokedAt: undefined };
      assert.deepEqual(await store.list(), [
        { id: acme.id, tenant: 'acme', prefix: acme.key.slice(0, 12), createdAt: start, ...unused },
        { id: globex.id, tenant: 'globex', prefix: globex.key.slice(0, 12), createdAt: start + 1000, ...unused },
      ]);
      // Neither the ledger's file nor its write-ahead log holds a key in the clear, and no keys.db is made.
      const stored = ['ledger.db', 'ledger.db-wal']
        .filter((file) => existsSync(join(dir, file)))
        .map((file) => readFileSync(join(dir, file)).toString('latin1'))
        .join('');
      assert.ok(!stored.includes(acme.key) && !stored.includes(globex.key));
      assert.ok(stored.includes(hashApiKey(acme.key)));
      assert.equal(existsSync(join(dir, 'keys.db')), false);
    }, clock);
  });

  it('revokes a key by id: its requests are refused from then on, other keys unaffected; it stays listed as revoked', () => {
    const clock = new ManualClock(start);
    return withStore(async (store) => {
      const kept = await store.create('acme');
      const revoked = await store.create('acme');
      clock.advance(5000);
      assert.equal(await store.revoke(revoked.id), 'revoked');
      assert.equal(await store.revoke(revoked.id), 'already_revoked');
      assert.equal(await store.revoke('nosuchkey'), 'unknown');
      assert.equal(await store.tenantOf(revoked.key), undefined);
      assert.equal(await store.identify(revoked.key), undefined);
      assert.equal(await store.isActive(revoked.id), false);
      assert.equal(await store.isActive('nosuchkey'), false);
      assert.equal(await store.tenantOf(kept.key), 'acme');
      assert.equal(await store.isActive(kept.id), true);
      assert.deepEqual(
        (await store.list()).map((k) => [k.id, k.revokedAt]).sort((a, b) => String(a[0]).localeCompare(String(b[0]))),
        [
          [kept.id, undefined],
          [revoked.id, start + 5000],
        ].sort((a, b) => String(a[0]).localeCompare(String(b[0]))),
      );
    }, clock);
  });

  it('makes admin keys, which act for no one tenant and are listed as admin', () =>
    withStore(async (store) => {
      const admin = await store.createAdmin();
      const tenant = await store.create('acme');
      assert.match(admin.key, /^prk_[A-Za-z0-9_-]{43}$/);
      assert.deepEqual(await store.identify(admin.key), { id: admin.id, kind: 'admin' });
      assert.deepEqual(await store.identify(tenant.key), { id: tenant.id, kind: 'tenant', tenant: 'acme' });
      assert.equal(await store.tenantOf(admin.key), undefined, 'an admin key is no tenant key');
      const listed = (await store.list()).find((k) => k.id === admin.id)!;
      assert.equal(listed.kind, 'admin');
      assert.equal(listed.tenant, undefined);
      assert.equal(await store.revoke(admin.id), 'revoked');
      assert.equal(await store.identify(admin.key), undefined);
    }));

  it('records when a key was last used, at most once a minute per key', () => {
    const clock = new ManualClock(start);
    return withStore(async (store) => {
      const { id, key } = await store.create('acme');
      const lastUsed = async (): Promise<number | undefined> => (await store.list()).find((k) => k.id === id)!.lastUsedAt;
      assert.equal(await lastUsed(), undefined);
      await store.identify(key);
      assert.equal(await lastUsed(), start);
      // Within the resolution, uses are not written (a write would move the time on): the row keeps the first use.
      clock.advance(lastUsedResolutionMs - 1);
      for (let i = 0; i < 100; i++) await store.identify(key);
      assert.equal(await lastUsed(), start);
      clock.advance(1);
      await store.identify(key);
      assert.equal(await lastUsed(), start + lastUsedResolutionMs);
    }, clock);
  });

  it('a last use that cannot be written is reported, the key still works, and the next use tries again', async () => {
    const dir = tempDir('planrun-keys-');
    const failures: unknown[] = [];
    const ledger = await openSqliteLedger({ path: join(dir.path, 'ledger.db') });
    const store = new KeyStore(ledger, { onUseNotRecorded: (error) => failures.push(error) });
    const other = new Database(join(dir.path, 'ledger.db'));
    try {
      const { id, key } = await store.create('acme');
      other.exec("CREATE TRIGGER refuse BEFORE UPDATE ON api_keys BEGIN SELECT RAISE(ABORT, 'no writes now'); END");
      assert.deepEqual(await store.identify(key), { id, kind: 'tenant', tenant: 'acme' });
      assert.equal(failures.length, 1);
      assert.match(String(failures[0]), /no writes now/);
      assert.equal((await store.list())[0]!.lastUsedAt, undefined);
      other.exec('DROP TRIGGER refuse');
      await store.identify(key);
      assert.notEqual((await store.list())[0]!.lastUsedAt, undefined, 'recorded at the next use, not a minute later');
    } finally {
      other.close();
      await ledger.close();
      dir.remove();
    }
  });

  it('refuses tenant names that could not be a routing-key word', () =>
    withStore(async (store) => {
      for (const name of ['', 'acme.eu', 'a b', 'a*', '#', '9lives', 'x'.repeat(65)]) {
        await assert.rejects(store.create(name), { name: 'KeyStoreError', message: /tenant name .* must start with a letter/ }, name);
      }
      assert.equal((await store.create('Acme_EU-2')).tenant, 'Acme_EU-2');
      assert.equal((await store.list()).length, 1);
    }));

  it('keeps keys across reopening the ledger', async () => {
    const dir = tempDir('planrun-keys-');
    try {
      const first = await openSqliteLedger({ path: join(dir.path, 'ledger.db') });
      const { key } = await new KeyStore(first).create('acme');
      await first.close();
      const again = await openSqliteLedger({ path: join(dir.path, 'ledger.db') });
      assert.equal(await new KeyStore(again).tenantOf(key), 'acme');
      await again.close();
    } finally {
      dir.remove();
    }
  });
});

describe('a keys.db of an older planrun', () => {
  it('is imported into the ledger once, every key as it was, then renamed keys.db.imported', () =>
    withStore(async (store, ledger, dir) => {
      writeKeyFile(dir, [
        ['0000000000a1', 'acme', keyOf('a'), 1000, 'tenant', 5000, null],
        ['0000000000a2', '', keyOf('b'), 2000, 'admin', null, null],
        ['0000000000a3', 'globex', keyOf('c'), 3000, 'tenant', 4000, 6000],
      ]);
      assert.equal(await importKeyFile(ledger, dir), 3);
      assert.equal(existsSync(join(dir, 'keys.db')), false);
      assert.equal(existsSync(join(dir, 'keys.db.imported')), true, 'kept, renamed, for a downgrade');
      assert.deepEqual(await store.list(), [
        { id: '0000000000a1', kind: 'tenant', tenant: 'acme', prefix: keyOf('a').slice(0, 12), createdAt: 1000, lastUsedAt: 5000, revokedAt: undefined },
        { id: '0000000000a2', kind: 'admin', tenant: undefined, prefix: keyOf('b').slice(0, 12), createdAt: 2000, lastUsedAt: undefined, revokedAt: undefined },
        { id: '0000000000a3', kind: 'tenant', tenant: 'globex', prefix: keyOf('c').slice(0, 12), createdAt: 3000, lastUsedAt: 4000, revokedAt: 6000 },
      ]);
      assert.deepEqual(await store.identify(keyOf('a')), { id: '0000000000a1', kind: 'tenant', tenant: 'acme' });
      assert.deepEqual(await store.identify(keyOf('b')), { id: '0000000000a2', kind: 'admin' });
      assert.equal(await store.identify(keyOf('c')), undefined, 'revoked before the import, revoked after');
      assert.equal(await importKeyFile(ledger, dir), undefined, 'nothing left to import');
    }));

  it('imported again (a start-up that died before the rename) changes nothing the ledger has since', () =>
    withStore(async (store, ledger, dir) => {
      writeKeyFile(dir, [['0000000000a1', 'acme', keyOf('a'), 1000, 'tenant', null, null]]);
      const copy = readFileSync(join(dir, 'keys.db'));
      assert.equal(await importKeyFile(ledger, dir), 1);
      assert.equal(await store.revoke('0000000000a1'), 'revoked');
      // The same file back in place, as if the rename never happened.
      await import('node:fs').then((fs) => fs.writeFileSync(join(dir, 'keys.db'), copy));
      assert.equal(await importKeyFile(ledger, dir), 0);
      assert.equal(await store.identify(keyOf('a')), undefined, 'still revoked');
    }));

  it('made before key kinds, revocation and last use: its keys keep working as tenant keys', () =>
    withStore(async (store, ledger, dir) => {
      const old = new Database(join(dir, 'keys.db'));
      old.exec(`CREATE TABLE api_keys (
        id TEXT PRIMARY KEY, tenant TEXT NOT NULL, key_sha256 TEXT NOT NULL UNIQUE, prefix TEXT NOT NULL, created_at INTEGER NOT NULL
      ) STRICT`);
      old.prepare('INSERT INTO api_keys VALUES (?, ?, ?, ?, ?)').run('0123456789ab', 'acme', hashApiKey(keyOf('a')), keyOf('a').slice(0, 12), 1000);
      old.close();
      assert.equal(await importKeyFile(ledger, dir), 1);
      assert.deepEqual(await store.identify(keyOf('a')), { id: '0123456789ab', kind: 'tenant', tenant: 'acme' });
      assert.equal((await store.list())[0]!.kind, 'tenant');
    }));

  it('from a newer planrun is refused, naming the file, and left in place', () =>
    withStore(async (_store, ledger, dir) => {
      writeKeyFile(dir, []);
      const db = new Database(join(dir, 'keys.db'));
      db.pragma('user_version = 99');
      db.close();
      await assert.rejects(importKeyFile(ledger, dir), {
        name: 'KeyStoreError',
        message: /keys\.db into the ledger: it was made by a newer planrun \(key store version 99/,
      });
      assert.equal(existsSync(join(dir, 'keys.db')), true);
    }));
});
