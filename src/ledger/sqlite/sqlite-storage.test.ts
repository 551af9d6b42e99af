import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { ManualClock } from '../../core/clock.js';
import { tempDir } from '../../../test/testing/temp-dir.js';
import { LedgerError } from '../errors.js';
import { migrations } from './migrations.js';
import { openSqliteLedger } from './sqlite-ledger.js';

const dir = tempDir();
after(() => dir.remove());

async function rejectsWith(promise: Promise<unknown>, code: string, mentions: string): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof LedgerError, `expected a LedgerError, got ${String(error)}`);
    assert.equal(error.code, code);
    assert.ok(error.message.includes(mentions), `"${error.message}" should mention ${mentions}`);
    return true;
  });
}

describe('sqlite ledger storage', () => {
  it('opens with WAL, synchronous=FULL and every migration recorded', async () => {
    const path = join(dir.path, 'fresh.db');
    const ledger = await openSqliteLedger({ path });
    await ledger.close();
    const db = new Database(path, { readonly: true });
    assert.equal(db.pragma('journal_mode', { simple: true }), 'wal');
    const versions = db.prepare('SELECT version FROM schema_migrations ORDER BY version').pluck().all();
    assert.deepEqual(
      versions,
      migrations.map((m) => m.version),
    );
    db.close();
    const reopened = await openSqliteLedger({ path });
    await reopened.close();
  });

  it('applies synchronous=FULL on its own connection', async () => {
    const path = join(dir.path, 'sync.db');
    const ledger = await openSqliteLedger({ path });
    // The pragma is per connection; read it through the driver's own database handle.
    const db = (ledger as unknown as { db: Database.Database }).db;
    assert.equal(db.pragma('synchronous', { simple: true }), 2);
    await ledger.close();
  });

  it('refuses a corrupt database file, naming it', async () => {
    const path = join(dir.path, 'corrupt.db');
    writeFileSync(path, Buffer.alloc(8192, 'not a database at all '));
    await rejectsWith(openSqliteLedger({ path }), 'ledger_corrupt', path);
  });

  it('refuses a path it cannot write, naming it', async () => {
    const blocker = join(dir.path, 'a-file');
    writeFileSync(blocker, 'x');
    const path = join(blocker, 'ledger.db');
    await rejectsWith(openSqliteLedger({ path }), 'ledger_unavailable', path);
  });

  it('refuses a database from a newer planrun', async () => {
    const path = join(dir.path, 'newer.db');
    await (await openSqliteLedger({ path })).close();
    const db = new Database(path);
    db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, ?, 0)').run('from the future');
    db.close();
    await rejectsWith(openSqliteLedger({ path }), 'ledger_too_new', path);
  });

  it('refuses an invalid timing config loudly', async () => {
    await rejectsWith(openSqliteLedger({ path: join(dir.path, 'cfg.db'), config: { leaseTtlMs: -5 } }), 'invalid_input', 'leaseTtlMs');
  });

  it('a full disk during settle fails the settle and announces nothing', async () => {
    const clock = new ManualClock();
    const ledger = await openSqliteLedger({ path: join(dir.path, 'full.db'), clock });
    const { job } = await ledger.submit({ tenant: 't', type: 'x', input: {} });
    const lease = await ledger.grantLease({ jobId: job.id, attempt: 1, worker: 'w' });
    assert.ok(lease.granted);
    const before = await ledger.outboxStats();
    // Cap the file at its current size: the next page it needs is a full disk to SQLite.
    const db = (ledger as unknown as { db: Database.Database }).db;
    db.pragma(`max_page_count = ${db.pragma('page_count', { simple: true }) as number}`);
    const huge = { data: 'x'.repeat(1_000_000) };
    await rejectsWith(
      ledger.settle({ jobId: job.id, attempt: 1, token: lease.token, outcome: { kind: 'finished', result: huge } }),
      'ledger_full',
      'nothing was changed',
    );
    const after = await ledger.getJob(job.id);
    assert.equal(after?.state, 'running');
    assert.deepEqual(await ledger.outboxStats(), before);
    await ledger.close();
  });

  it('rejects operations after close with a typed error', async () => {
    const ledger = await openSqliteLedger({ path: join(dir.path, 'closed.db') });
    await ledger.close();
    await rejectsWith(ledger.getJob('x'), 'ledger_closed', 'closed');
  });
});
