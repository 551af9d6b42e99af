import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { PrivatePostgres } from './private-postgres.js';
import { isAlive } from './processes.js';

describe('PrivatePostgres', { timeout: 180_000 }, () => {
  let server: PrivatePostgres;

  before(async () => {
    server = await PrivatePostgres.start();
  });

  after(async () => {
    await server?.stop();
  });

  async function query(sql: string): Promise<pg.QueryResult> {
    const client = new pg.Client({ connectionString: server.url() });
    await client.connect();
    try {
      return await client.query(sql);
    } finally {
      await client.end();
    }
  }

  it('runs on a port of its own, keeps its data across a restart that cuts its connections, and is gone after stop', async () => {
    assert.notEqual(server.port, 5432);
    await query('CREATE TABLE kept (n int); INSERT INTO kept VALUES (42)');
    const held = new pg.Client({ connectionString: server.url() });
    await held.connect();
    const cut = new Promise<Error>((resolve) => held.on('error', resolve));
    await server.restart();
    assert.match((await cut).message, /terminat|shut ?down|connection/i, 'the restart cut the open connection');
    await held.end().catch(() => undefined);
    assert.deepEqual((await query('SELECT n FROM kept')).rows, [{ n: 42 }]);
    const pid = server.pid();
    assert.ok(pid !== undefined && (await isAlive(pid)));
    await server.stop();
    assert.equal(await isAlive(pid), false, 'the postmaster is gone');
    await assert.rejects(query('SELECT 1'));
  });
});
