/**
 * Upgrade order (docs/deploy.md): an orchestrator older than its ledger's schema refuses to
 * start, with one line saying so, and changes nothing, on SQLite and on PostgreSQL, so a
 * rolling upgrade that starts a new orchestrator first (which migrates) cannot have an old
 * one write to a schema it does not know.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import Database from 'better-sqlite3';
import { fastTestUrl, TestSchemas } from '../../test/ledger/postgres/testing.js';
import { freePort } from '../../test/testing/free-port.js';
import { rabbitMqUrl } from '../../test/testing/services.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { defaultLedgerConfig } from '../ledger/ledger.js';
import { openLedger } from '../ledger/open-ledger.js';
import { migrations } from '../ledger/sqlite/migrations.js';

const planrun = fileURLToPath(new URL('../cli/main.js', import.meta.url));
const latest = migrations.at(-1)!.version;

/** Runs `planrun orchestrator` on `ledger` until it exits (it must: it refuses the ledger). */
async function startOrchestrator(dataDir: string, ledger: string[]): Promise<{ code: number; stderr: string }> {
  // The ledger is opened before any queue is declared: the prefix stays unused on RabbitMQ.
  const prefix = `t${randomBytes(4).toString('hex')}`;
  const args = ['orchestrator', '--amqp', rabbitMqUrl, '--prefix', prefix, '--data-dir', dataDir, '--port', String(await freePort()), ...ledger];
  try {
    await promisify(execFile)(process.execPath, [planrun, ...args], { timeout: 30_000 });
    return { code: 0, stderr: '' };
  } catch (error) {
    const failed = error as { code: number; stderr: string };
    return { code: failed.code, stderr: failed.stderr };
  }
}

describe('an orchestrator older than its ledger', () => {
  const schemas = new TestSchemas();
  after(() => schemas.dropAll());

  it('on SQLite: refuses to start, naming the file and both versions, and changes nothing', async () => {
    const dir = tempDir('planrun-upgrade-');
    try {
      await (await openLedger(undefined, dir.path, defaultLedgerConfig)).close();
      const file = join(dir.path, 'ledger.db');
      const db = new Database(file);
      db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(latest + 1, 'from a newer planrun', 0);
      db.close();
      const { code, stderr } = await startOrchestrator(dir.path, []);
      assert.equal(code, 2);
      assert.equal(
        stderr.trim().split('\n').at(-1),
        `planrun: ledger database ${file} is at schema version ${latest + 1}, newer than this planrun knows (${latest}); upgrade planrun`,
      );
      const after = new Database(file, { readonly: true });
      assert.equal((after.prepare('SELECT MAX(version) AS v FROM schema_migrations').get() as { v: number }).v, latest + 1);
      after.close();
    } finally {
      dir.remove();
    }
  });

  it('on PostgreSQL: refuses to start, naming the schema and both versions, and changes nothing', async () => {
    const dir = tempDir('planrun-upgrade-');
    const schema = schemas.reserve();
    const url = `${fastTestUrl()}&schema=${schema}`;
    try {
      await (await openLedger(url, dir.path, defaultLedgerConfig)).close();
      await schemas.admin.query(`INSERT INTO ${schema}.schema_migrations (version, name, applied_at) VALUES ($1, 'from a newer planrun', 0)`, [latest + 1]);
      const { code, stderr } = await startOrchestrator(dir.path, ['--ledger', url]);
      assert.equal(code, 2);
      assert.match(
        stderr.trim().split('\n').at(-1)!,
        new RegExp(
          `^planrun: ledger at postgres://\\S+ \\(schema ${schema}\\) is at schema version ${latest + 1}, newer than this planrun knows \\(${latest}\\); upgrade planrun$`,
        ),
      );
      const versions = await schemas.admin.query(`SELECT COUNT(*)::int AS n, MAX(version) AS v FROM ${schema}.schema_migrations`);
      assert.deepEqual(versions.rows[0], { n: migrations.length + 1, v: latest + 1 }, 'nothing applied, nothing removed');
    } finally {
      dir.remove();
    }
  });
});
