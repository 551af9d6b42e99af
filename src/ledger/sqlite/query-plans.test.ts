/**
 * The sweep's and the dispatcher's queries read what is due through their partial
 * indexes, and the bulk UPDATEs look their jobs up by id: without statistics SQLite's
 * planner prefers jobs_state_listing's equality on state, which reads every running or
 * queued job on each pass (65 ms a pass at 100,000 live leases, over a second at a
 * million queued jobs). Checked on the plan, which does not depend on how many rows there are.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { tempDir } from '../../../test/testing/temp-dir.js';
import { openSqliteLedger } from './sqlite-ledger.js';
import { indexedQueries } from './statements.js';

const dir = tempDir();
after(() => dir.remove());

/** EXPLAIN QUERY PLAN of `sql`, its parameters bound to NULL (the plan does not depend on them). */
function plan(db: Database.Database, sql: string): string {
  const named = [...sql.matchAll(/@(\w+)/g)].map((m) => m[1]!);
  const positional = (sql.match(/\?/g) ?? []).length;
  const statement = db.prepare(`EXPLAIN QUERY PLAN ${sql}`);
  const rows = (
    named.length > 0 ? statement.all(Object.fromEntries(named.map((name) => [name, null]))) : statement.all(...Array(positional).fill(null))
  ) as Array<{
    detail: string;
  }>;
  return rows.map((row) => row.detail).join('; ');
}

describe('sqlite ledger query plans', () => {
  it('reads what is due through the partial indexes, and bulk updates by id, never every job of a state', async () => {
    const path = join(dir.path, 'plans.db');
    await (await openSqliteLedger({ path })).close();
    const db = new Database(path, { readonly: true });
    try {
      for (const { name, sql, index } of indexedQueries) {
        const detail = plan(db, sql);
        assert.ok(detail.includes(`INDEX ${index}`), `${name} should read through ${index}: ${detail}`);
        assert.ok(!detail.includes('jobs_state_listing'), `${name} should not walk every job of a state: ${detail}`);
      }
    } finally {
      db.close();
    }
  });
});
