/**
 * Group commit (group-commit.ts): writes of one event-loop turn share one transaction,
 * each in its own savepoint, and nobody is answered before the shared COMMIT.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type Database from 'better-sqlite3';
import { ManualClock } from '../../core/clock.js';
import { tempDir } from '../../../test/testing/temp-dir.js';
import { LedgerError } from '../errors.js';
import type { Ledger } from '../ledger.js';
import { openSqliteLedger, sqliteLedgerStats } from './sqlite-ledger.js';

const dir = tempDir();
after(() => dir.remove());
let n = 0;
const open = (clock = new ManualClock()) => openSqliteLedger({ path: join(dir.path, `gc-${n++}.db`), clock });
const transactions = (ledger: Ledger) => sqliteLedgerStats(ledger)!.transactions;

describe('sqlite ledger group commit', () => {
  it('writes asked for in the same turn share one transaction, each answered with its own result', async () => {
    const ledger = await open();
    const before = transactions(ledger);
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => ledger.submit({ tenant: 't', type: 'x', input: { i } })));
    assert.equal(transactions(ledger) - before, 1);
    assert.deepEqual(
      results.map((r) => r.job.input),
      Array.from({ length: 50 }, (_, i) => ({ i })),
    );
    assert.equal(new Set(results.map((r) => r.job.id)).size, 50);
    await ledger.close();
  });

  it('a write is answered only once its transaction committed', async () => {
    const ledger = await open();
    const before = transactions(ledger);
    const pending = ledger.submit({ tenant: 't', type: 'x', input: {} });
    assert.equal(transactions(ledger), before, 'nothing committed yet in the turn the write was asked for');
    await pending;
    assert.equal(transactions(ledger), before + 1);
    await ledger.close();
  });

  it('one write that fails is rolled back alone; the others of its transaction commit', async () => {
    const ledger = await open();
    const before = transactions(ledger);
    const [first, failing, last] = await Promise.allSettled([
      ledger.submit({ tenant: 't', type: 'x', input: 'first', idempotencyKey: 'a' }),
      // Its first submission is written before the second throws: the savepoint must undo it.
      ledger.submitMany([
        { tenant: 't', type: 'x', input: 'undone', idempotencyKey: 'b' },
        { tenant: 't', type: '', input: 'invalid' },
      ]),
      ledger.submit({ tenant: 't', type: 'x', input: 'last', idempotencyKey: 'c' }),
    ]);
    assert.equal(transactions(ledger) - before, 1);
    assert.equal(first.status, 'fulfilled');
    assert.equal(last.status, 'fulfilled');
    assert.equal(failing.status, 'rejected');
    assert.ok(failing.reason instanceof LedgerError && failing.reason.code === 'invalid_input');
    const page = await ledger.listJobs({ tenant: 't' });
    assert.deepEqual(page.jobs.map((j) => j.idempotencyKey).sort(), ['a', 'c']);
    await ledger.close();
  });

  it('a full disk fails only the write that needed the space; a concurrent renewal still commits', async () => {
    const clock = new ManualClock();
    const ledger = await open(clock);
    const leases = [];
    for (let i = 0; i < 2; i++) {
      const { job } = await ledger.submit({ tenant: 't', type: 'x', input: {} });
      const lease = await ledger.grantLease({ jobId: job.id, attempt: 1, worker: 'w' });
      assert.ok(lease.granted);
      leases.push({ jobId: job.id, attempt: 1, token: lease.token });
    }
    const db = (ledger as unknown as { db: Database.Database }).db;
    db.pragma(`max_page_count = ${db.pragma('page_count', { simple: true }) as number}`);
    const [settle, renew] = await Promise.allSettled([
      ledger.settle({ ...leases[0]!, outcome: { kind: 'finished', result: { data: 'x'.repeat(1_000_000) } } }),
      ledger.renewLeases({ worker: 'w', leases: [leases[1]!] }),
    ]);
    assert.equal(settle.status, 'rejected');
    assert.ok(settle.reason instanceof LedgerError && settle.reason.code === 'ledger_full');
    assert.equal(renew.status, 'fulfilled');
    assert.equal(renew.value.renewed.length, 1);
    assert.equal((await ledger.getJob(leases[0]!.jobId))?.state, 'running');
    await ledger.close();
  });

  it('close answers the writes already asked for', async () => {
    const ledger = await open();
    const pending = ledger.submit({ tenant: 't', type: 'x', input: {} });
    await ledger.close();
    assert.equal((await pending).created, true);
  });
});
