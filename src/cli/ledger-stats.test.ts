/**
 * `planrun ledger stats` through the built CLI: it reads a ledger an orchestrator made,
 * SQLite in the data dir or PostgreSQL with --ledger, and refuses one that is not there
 * instead of creating it empty.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';
import pg from 'pg';
import { openPostgresLedger } from '../ledger/postgres/postgres-ledger.js';
import { openSqliteLedger } from '../ledger/sqlite/sqlite-ledger.js';
import { postgresUrl } from '../../test/testing/services.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { cliPath } from '../../test/testing/worker-process.js';

async function planrun(cwd: string, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const { PLANRUN_LEDGER: _ledger, ...env } = process.env;
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [cliPath, ...args], { cwd, env });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

async function schemaExists(schema: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: postgresUrl });
  await client.connect();
  try {
    return ((await client.query('SELECT 1 FROM information_schema.schemata WHERE schema_name = $1', [schema])).rowCount ?? 0) > 0;
  } finally {
    await client.end();
  }
}

async function dropSchema(schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: postgresUrl });
  await client.connect();
  await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await client.end();
}

describe('planrun ledger stats', () => {
  it('in a folder with no planrun data: refuses, naming the data dir, and creates nothing', async () => {
    const dir = tempDir('planrun-stats-');
    try {
      const run = await planrun(dir.path, 'ledger', 'stats');
      assert.equal(run.code, 2);
      assert.equal(run.stderr, 'planrun: no planrun data in ./.planrun (use --data-dir)\n');
      assert.equal(run.stdout, '');
      const elsewhere = await planrun(dir.path, 'ledger', 'stats', '--data-dir', 'data');
      assert.equal(elsewhere.stderr, 'planrun: no planrun data in data (use --data-dir)\n');
      assert.deepEqual(readdirSync(dir.path), []);
    } finally {
      dir.remove();
    }
  });

  it('prints jobs by state and the outbox of the SQLite ledger in the data dir', async () => {
    const dir = tempDir('planrun-stats-');
    try {
      const ledger = await openSqliteLedger({ path: join(dir.path, 'ledger.db') });
      await ledger.submit({ tenant: 'acme', type: 'sleep', input: {} });
      await ledger.close();
      const run = await planrun(dir.path, 'ledger', 'stats', '--data-dir', dir.path);
      assert.equal(run.code, 0, run.stderr);
      const stats = JSON.parse(run.stdout) as { jobs: Record<string, number>; outbox: unknown };
      assert.deepEqual(stats.jobs, { queued: 1, running: 0, finished: 0, failed: 0 });
      assert.ok(stats.outbox);
    } finally {
      dir.remove();
    }
  });

  it('reads a PostgreSQL ledger with --ledger, and refuses a schema that holds none without creating it', async () => {
    const dir = tempDir('planrun-stats-');
    const schema = `stats_${process.pid}_${Date.now()}`;
    const missing = `${schema}_missing`;
    try {
      const ledger = await openPostgresLedger({ connectionString: postgresUrl, schema });
      await ledger.submit({ tenant: 'acme', type: 'sleep', input: {} });
      await ledger.close();
      const run = await planrun(dir.path, 'ledger', 'stats', '--ledger', `${postgresUrl}?schema=${schema}`);
      assert.equal(run.code, 0, run.stderr);
      assert.equal((JSON.parse(run.stdout) as { jobs: Record<string, number> }).jobs.queued, 1);

      const refused = await planrun(dir.path, 'ledger', 'stats', '--ledger', `${postgresUrl}?schema=${missing}`);
      assert.equal(refused.code, 2);
      assert.match(
        refused.stderr,
        new RegExp(`^planrun: no planrun ledger in schema "${missing}" of PostgreSQL postgres://\\S+ \\(check --ledger and its \\?schema=\\)\\n$`),
      );
      assert.equal(await schemaExists(missing), false);
      assert.deepEqual(readdirSync(dir.path), []);
    } finally {
      await dropSchema(schema);
      dir.remove();
    }
  });
});
