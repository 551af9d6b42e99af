/**
 * The ledger's pool against a real PostgreSQL (the shared server; only the test's own
 * connection is ended): a connection the server ends while an operation holds it (a
 * restart, `pg_terminate_backend`) fails that operation, never the process.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { postgresUrl } from '../../../test/testing/services.js';
import { createPool, isConnectionFailure } from './database.js';

describe('the PostgreSQL pool', () => {
  it('survives the server ending a connection that is checked out between two statements', async () => {
    const pool = createPool({ connectionString: postgresUrl, schema: 'public', poolSize: 2, connectionTimeoutMs: 10_000, queryTimeoutMs: 10_000 });
    try {
      const client = await pool.connect();
      const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      const ended = new Promise((resolve) => client.once('end', resolve));
      // What a `pg_ctl restart -m fast` does to every connection: FATAL 57P01, then the close.
      await pool.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
      await ended;
      // Without a listener of the pool's, that 'error' event would have crashed the process.
      await assert.rejects(client.query('SELECT 1'), (error: unknown) => isConnectionFailure(error));
      client.release(true);
      const after = await pool.query<{ one: number }>('SELECT 1 AS one');
      assert.equal(after.rows[0]!.one, 1, 'the pool serves from a fresh connection');
    } finally {
      await pool.end();
    }
  });
});
