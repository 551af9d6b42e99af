import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { promisify } from 'node:util';
import { fastTestUrl, TestSchemas } from '../../test/ledger/postgres/testing.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { defaultLedgerConfig } from '../ledger/ledger.js';
import { openLedger } from '../ledger/open-ledger.js';
import { hashApiKey } from './api-key.js';
import { KeyStore } from './key-store.js';

const planrun = fileURLToPath(new URL('../cli/main.js', import.meta.url));

async function run(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [planrun, ...args]);
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

/** Uses the keys of the ledger in `dataDir` (or at `ledger`), as an orchestrator started there would. */
async function withKeys<T>(dataDir: string, use: (store: KeyStore) => Promise<T>, ledger?: string): Promise<T> {
  const opened = await openLedger(ledger, dataDir, defaultLedgerConfig);
  try {
    return await use(new KeyStore(opened));
  } finally {
    await opened.close();
  }
}

const schemas = new TestSchemas();
after(() => schemas.dropAll());

describe('planrun keys', () => {
  it('create prints the key alone on the last line; list shows it without the secret; revoke ends it', async () => {
    const dir = tempDir('planrun-keys-cli-');
    try {
      const created = await run('keys', 'create', '--tenant', 'acme', '--data-dir', dir.path);
      assert.equal(created.code, 0, created.stderr);
      const key = created.stdout.trimEnd().split('\n').pop()!;
      assert.match(key, /^prk_[A-Za-z0-9_-]{43}$/);
      assert.equal(created.stdout, `${key}\n`, 'stdout is the key alone');
      assert.match(created.stderr, /for tenant acme; store it now/);

      const record = await withKeys(dir.path, async (store) => {
        assert.equal(await store.tenantOf(key), 'acme');
        return (await store.list())[0];
      });

      const listed = await run('keys', 'list', '--data-dir', dir.path);
      assert.equal(listed.code, 0);
      const lines = listed.stdout.trimEnd().split('\n');
      assert.match(lines[0]!, /^ID\s+TENANT\s+KIND\s+KEY\s+CREATED\s+LAST USED\s+REVOKED$/);
      assert.match(
        lines[1]!,
        new RegExp(`^${record!.id}\\s+acme\\s+tenant\\s+${key.slice(0, 12)}\\.\\.\\.\\s+\\d{4}-\\d\\d-\\d\\dT\\S+\\s+\\d{4}-\\d\\d-\\d\\dT\\S+\\s+-$`),
      );
      assert.ok(!listed.stdout.includes(key));

      const revoked = await run('keys', 'revoke', record!.id, '--data-dir', dir.path);
      assert.equal(revoked.code, 0);
      assert.equal(revoked.stdout, `revoked key ${record!.id}\n`);
      assert.equal(await withKeys(dir.path, (store) => store.tenantOf(key)), undefined);

      const afterRevoke = await run('keys', 'list', '--data-dir', dir.path);
      assert.match(
        afterRevoke.stdout.trimEnd().split('\n')[1]!,
        new RegExp(`^${record!.id}\\s+acme\\s+tenant\\s.*\\s\\d{4}-\\d\\d-\\d\\dT\\S+Z$`),
        'listed as revoked, with the time',
      );

      const again = await run('keys', 'revoke', record!.id, '--data-dir', dir.path);
      assert.equal(again.code, 2);
      assert.equal(again.stderr, `planrun: key ${record!.id} is already revoked\n`);
      const unknown = await run('keys', 'revoke', 'nosuchid', '--data-dir', dir.path);
      assert.equal(unknown.code, 2);
      assert.equal(unknown.stderr, 'planrun: no key has id nosuchid (see planrun keys list)\n');
    } finally {
      dir.remove();
    }
  });

  it('create --admin makes an admin key, listed with tenant "*" and kind admin; --admin with --tenant is a usage error', async () => {
    const dir = tempDir('planrun-keys-cli-');
    try {
      const created = await run('keys', 'create', '--admin', '--data-dir', dir.path);
      assert.equal(created.code, 0, created.stderr);
      const key = created.stdout.trimEnd();
      assert.match(key, /^prk_[A-Za-z0-9_-]{43}$/);
      assert.match(created.stderr, /admin key, for every tenant's jobs; store it now/);
      const record = await withKeys(dir.path, async (store) => {
        assert.equal((await store.identify(key))?.kind, 'admin');
        return (await store.list())[0];
      });
      const listed = await run('keys', 'list', '--data-dir', dir.path);
      assert.match(listed.stdout, new RegExp(`^${record!.id}\\s+\\*\\s+admin\\s+${key.slice(0, 12)}\\.\\.\\.\\s`, 'm'));
      assert.ok(!listed.stdout.includes(key));

      const both = await run('keys', 'create', '--admin', '--tenant', 'acme', '--data-dir', dir.path);
      assert.equal(both.code, 2);
      assert.equal(both.stderr, 'planrun: --admin and --tenant exclude each other: an admin key acts for every tenant\n');
      assert.equal(both.stdout, '');
    } finally {
      dir.remove();
    }
  });

  it('refuses a bad tenant name in one line, and needs --tenant', async () => {
    const dir = tempDir('planrun-keys-cli-');
    try {
      const dotted = await run('keys', 'create', '--tenant', 'acme.eu', '--data-dir', dir.path);
      assert.equal(dotted.code, 2);
      assert.match(dotted.stderr, /^planrun: tenant name "acme.eu" must start with a letter/);
      assert.equal(dotted.stdout, '');
      assert.deepEqual(readdirSync(dir.path), [], 'a refused tenant makes no ledger');
      const missing = await run('keys', 'create', '--data-dir', dir.path);
      assert.equal(missing.code, 2);
      assert.match(missing.stderr, /required option '--tenant <name>' not specified/);
    } finally {
      dir.remove();
    }
  });

  it('list and revoke refuse a folder with no planrun data, and create nothing; create says it makes a new ledger', async () => {
    const dir = tempDir('planrun-keys-cli-');
    try {
      for (const args of [
        ['keys', 'list'],
        ['keys', 'revoke', 'abc'],
      ]) {
        const refused = await run(...args, '--data-dir', dir.path);
        assert.equal(refused.code, 2, args.join(' '));
        assert.equal(refused.stderr, `planrun: no planrun data in ${dir.path} (use --data-dir)\n`);
        assert.equal(refused.stdout, '');
      }
      assert.deepEqual(readdirSync(dir.path), []);
      const created = await run('keys', 'create', '--tenant', 'acme', '--data-dir', dir.path);
      assert.equal(created.code, 0, created.stderr);
      assert.match(created.stderr, new RegExp(`^made a new ledger in ${dir.path}: an orchestrator with --data-dir ${dir.path} accepts this key$`, 'm'));
      const again = await run('keys', 'create', '--tenant', 'acme', '--data-dir', dir.path);
      assert.doesNotMatch(again.stderr, /new ledger/);
      assert.equal((await run('keys', 'list', '--data-dir', dir.path)).code, 0);
    } finally {
      dir.remove();
    }
  });

  it('list, in a data dir with only the keys.db of an older planrun, imports its keys into the ledger and lists them', async () => {
    const dir = tempDir('planrun-keys-cli-');
    try {
      const key = 'prk_' + 'k'.repeat(43);
      const old = new Database(join(dir.path, 'keys.db'));
      old.exec(`CREATE TABLE api_keys (
        id TEXT PRIMARY KEY, tenant TEXT NOT NULL, key_sha256 TEXT NOT NULL UNIQUE, prefix TEXT NOT NULL, created_at INTEGER NOT NULL
      ) STRICT`);
      old.prepare('INSERT INTO api_keys VALUES (?, ?, ?, ?, ?)').run('00000000beef', 'acme', hashApiKey(key), key.slice(0, 12), Date.UTC(2026, 0, 1));
      old.close();
      const listed = await run('keys', 'list', '--data-dir', dir.path);
      assert.equal(listed.code, 0, listed.stderr);
      assert.match(listed.stdout.trimEnd().split('\n')[1]!, /^00000000beef\s+acme\s+tenant\s+prk_kkkkkkkk\.\.\.\s+2026-01-01T00:00:00\.000Z\s+-\s+-$/);
      assert.equal(existsSync(join(dir.path, 'keys.db')), false);
      assert.equal(existsSync(join(dir.path, 'keys.db.imported')), true);
      assert.equal(await withKeys(dir.path, (store) => store.tenantOf(key)), 'acme', 'the orchestrator of this data dir accepts it');
    } finally {
      dir.remove();
    }
  });

  it('--ledger postgres://…: create, list and revoke work on that ledger, and make nothing in the data dir', async () => {
    const dir = tempDir('planrun-keys-cli-');
    const schema = schemas.reserve();
    const url = `${fastTestUrl()}&schema=${schema}`;
    try {
      const created = await run('keys', 'create', '--tenant', 'acme', '--ledger', url, '--data-dir', dir.path);
      assert.equal(created.code, 0, created.stderr);
      assert.doesNotMatch(created.stderr, /new ledger/);
      const key = created.stdout.trimEnd();
      const record = await withKeys(
        dir.path,
        async (store) => {
          assert.equal(await store.tenantOf(key), 'acme');
          return (await store.list())[0]!;
        },
        url,
      );
      const listed = await run('keys', 'list', '--ledger', url);
      assert.equal(listed.code, 0, listed.stderr);
      assert.match(listed.stdout, new RegExp(`^${record.id}\\s+acme\\s+tenant\\s`, 'm'));
      const revoked = await run('keys', 'revoke', record.id, '--ledger', url);
      assert.equal(revoked.code, 0, revoked.stderr);
      assert.equal(await withKeys(dir.path, (store) => store.tenantOf(key), url), undefined);
      assert.deepEqual(readdirSync(dir.path), []);
      const missing = await run('keys', 'list', '--ledger', `${fastTestUrl()}&schema=${schema}_none`);
      assert.equal(missing.code, 2);
      assert.match(missing.stderr, /no planrun ledger in schema/);
    } finally {
      dir.remove();
    }
  });

  it('every keys command has --help', async () => {
    for (const command of [['keys'], ['keys', 'create'], ['keys', 'list'], ['keys', 'revoke']]) {
      const help = await run(...command, '--help');
      assert.equal(help.code, 0, command.join(' '));
      assert.match(help.stdout, new RegExp(`^Usage: planrun ${command.join(' ')}`), command.join(' '));
    }
  });
});
