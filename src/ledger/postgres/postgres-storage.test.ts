import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';

import { ManualClock } from '../../core/clock.js';
import { FaultProxy } from '../../../test/testing/fault-proxy.js';
import { LedgerError } from '../errors.js';
import type { Ledger } from '../ledger.js';
import { errors, expectGranted, finished, submitAndGrant, submitJob, submitParams } from '../../../test/ledger/testing.js';
import { migrations } from './migrations.js';
import { openPostgresLedger } from './postgres-ledger.js';
import { postgresUrl, TestSchemas } from '../../../test/ledger/postgres/testing.js';
import { waitFor } from '../../../test/testing/wait.js';

const schemas = new TestSchemas();
after(() => schemas.dropAll());

async function rejectsWith(promise: Promise<unknown>, code: string, ...mentions: string[]): Promise<LedgerError> {
  let caught: LedgerError | undefined;
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof LedgerError, `expected a LedgerError, got ${String(error)}`);
    assert.equal(error.code, code, error.message);
    for (const text of mentions) assert.ok(error.message.includes(text), `"${error.message}" should mention ${text}`);
    caught = error;
    return true;
  });
  return caught!;
}

/**
 * Several ledgers on one schema, as several orchestrators sharing one database; closed and
 * dropped after `body`. In fifo dispatch, so that a submit writes its work row at once: these
 * tests race the outbox's claims (fair dispatch's own races: test/ledger/conformance/dispatch.ts).
 * Without the abandoned-grant window: they let granted leases run out unrenewed.
 */
async function withSharedSchema(count: number, clock: ManualClock, body: (ledgers: Ledger[], schema: string) => Promise<void>): Promise<void> {
  const schema = schemas.reserve();
  const ledgers: Ledger[] = [];
  try {
    for (let i = 0; i < count; i++)
      ledgers.push(await openPostgresLedger({ connectionString: postgresUrl, schema, clock, config: { dispatch: 'fifo', grantWindowMs: null } }));
    await body(ledgers, schema);
  } finally {
    for (const ledger of ledgers) await ledger.close();
    await schemas.drop(schema);
  }
}

describe('postgres ledger storage', () => {
  it('records every migration with the ledger clock, and re-opening is a no-op that keeps the data', async () => {
    const clock = new ManualClock();
    await withSharedSchema(1, clock, async ([ledger], schema) => {
      const job = await submitJob(ledger!);
      const recorded = async () => (await schemas.admin.query(`SELECT version, name, applied_at FROM ${schema}.schema_migrations ORDER BY version`)).rows;
      const before = await recorded();
      assert.deepEqual(
        before.map((r) => [r.version, r.name]),
        migrations.map((m) => [m.version, m.name]),
      );
      for (const row of before) assert.equal(Number(row.applied_at), clock.now());
      clock.advance(60_000);
      const reopened = await openPostgresLedger({ connectionString: postgresUrl, schema, clock });
      try {
        assert.deepEqual(await recorded(), before, 'nothing applied or recorded again');
        assert.deepEqual(await reopened.getJob(job.id), job, 'the data is still there');
      } finally {
        await reopened.close();
      }
    });
  });

  it('creates the CHECKs, state-machine triggers and partial indexes the sweeper and outbox rely on', async () => {
    await withSharedSchema(1, new ManualClock(), async (_, schema) => {
      const indexes = (await schemas.admin.query('SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = $1', [schema])).rows;
      const def = (name: string) => indexes.find((i) => i.indexname === name)?.indexdef as string | undefined;
      assert.match(def('jobs_lease_due') ?? '', /\(lease_deadline\) WHERE \(state = 'running'::text\)/);
      assert.match(def('jobs_redispatch_due') ?? '', /\(redispatch_at\) WHERE \(state = 'queued'::text\)/);
      assert.match(def('outbox_one_result') ?? '', /UNIQUE INDEX .*\(job_id\) WHERE \(kind = 'result'::text\)/);
      assert.match(def('jobs_idempotency_key') ?? '', /UNIQUE INDEX .*\(tenant, idempotency_key\) WHERE \(idempotency_key IS NOT NULL\)/);
      const triggers = (
        await schemas.admin.query(`SELECT tgname FROM pg_trigger WHERE tgrelid = $1::regclass AND NOT tgisinternal ORDER BY tgname`, [`${schema}.jobs`])
      ).rows.map((r) => r.tgname);
      assert.deepEqual(triggers, ['jobs_announce_change', 'jobs_attempt_grows', 'jobs_state_edges', 'jobs_terminal_frozen']);
    });
  });

  it('the database itself refuses an illegal edge, a change to a terminal job, a shrinking attempt and a second result row', async () => {
    await withSharedSchema(1, new ManualClock(), async ([ledger], schema) => {
      const queued = await submitJob(ledger!);
      const running = await submitAndGrant(ledger!);
      const done = await submitAndGrant(ledger!);
      await ledger!.settle({ ...done.ref, outcome: finished() });
      const refuse = async (sql: string, values: unknown[], pattern: RegExp) =>
        assert.rejects(schemas.admin.query(sql, values), (error: Error) => {
          assert.match(error.message, pattern);
          return true;
        });
      await refuse(`UPDATE ${schema}.jobs SET state = 'finished', ended_at = 1 WHERE id = $1`, [queued.id], /illegal job state transition/);
      await refuse(`UPDATE ${schema}.jobs SET progress = 0.5 WHERE id = $1`, [done.job.id], /a terminal job never changes/);
      await refuse(`UPDATE ${schema}.jobs SET attempt = 0 WHERE id = $1`, [running.job.id], /attempts only grow|attempt_check/);
      await refuse(`UPDATE ${schema}.jobs SET state = 'bogus' WHERE id = $1`, [queued.id], /check constraint|illegal/);
      await refuse(
        `INSERT INTO ${schema}.outbox (kind, job_id, body, created_at, available_at) VALUES ('result', $1, '{}', 0, 0)`,
        [done.job.id],
        /outbox_one_result/,
      );
    });
  });

  it('several orchestrators opening a fresh schema at once: one migrates, all open', async () => {
    const schema = schemas.reserve();
    const opened = await Promise.allSettled(
      Array.from({ length: 4 }, () => openPostgresLedger({ connectionString: postgresUrl, schema, clock: new ManualClock() })),
    );
    try {
      for (const result of opened) assert.equal(result.status, 'fulfilled', result.status === 'rejected' ? String(result.reason) : '');
      const versions = (await schemas.admin.query(`SELECT version FROM ${schema}.schema_migrations ORDER BY version`)).rows;
      assert.deepEqual(
        versions.map((r) => r.version),
        migrations.map((m) => m.version),
      );
    } finally {
      for (const result of opened) if (result.status === 'fulfilled') await result.value.close();
      await schemas.drop(schema);
    }
  });

  it('migrations wait for the advisory lock of their schema: a second orchestrator never migrates alongside the first', async () => {
    const schema = schemas.reserve();
    const holder = await schemas.admin.connect();
    let opened: Promise<Ledger> | undefined;
    try {
      // Hold the lock the first orchestrator to start takes for its migrations (database.ts).
      await holder.query('BEGIN');
      await holder.query(`SELECT pg_advisory_xact_lock(${0x706c_616e}, hashtext($1))`, [schema]);
      let settled = false;
      opened = openPostgresLedger({ connectionString: postgresUrl, schema, clock: new ManualClock() });
      void opened.then(
        () => (settled = true),
        () => (settled = true),
      );
      await waitFor('the opening orchestrator waiting for the lock', async () => {
        const waiting = await schemas.admin.query(
          `SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
            WHERE l.locktype = 'advisory' AND NOT l.granted AND a.application_name = 'planrun-ledger'`,
        );
        return (waiting.rowCount ?? 0) > 0;
      });
      assert.equal(settled, false, 'it waits while the lock is held');
      const created = await schemas.admin.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]);
      assert.equal(created.rowCount, 0, 'and has made nothing yet');
      await holder.query('COMMIT');
      const ledger = await opened;
      await ledger.close();
      const versions = (await schemas.admin.query(`SELECT version FROM ${schema}.schema_migrations ORDER BY version`)).rows;
      assert.deepEqual(
        versions.map((r) => r.version),
        migrations.map((m) => m.version),
      );
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      holder.release();
      await opened?.then((ledger) => ledger.close()).catch(() => undefined);
      await schemas.drop(schema);
    }
  });

  it('refuses a schema from a newer planrun, naming it', async () => {
    await withSharedSchema(1, new ManualClock(), async (_, schema) => {
      await schemas.admin.query(`INSERT INTO ${schema}.schema_migrations (version, name, applied_at) VALUES (999, 'from the future', 0)`);
      await rejectsWith(openPostgresLedger({ connectionString: postgresUrl, schema }), 'ledger_too_new', `schema ${schema}`, '999');
    });
  });

  it('refuses a schema that holds tables planrun did not create, naming it', async () => {
    const schema = schemas.reserve();
    try {
      await schemas.admin.query(`CREATE SCHEMA ${schema}; CREATE TABLE ${schema}.jobs (id int)`);
      await rejectsWith(openPostgresLedger({ connectionString: postgresUrl, schema }), 'ledger_corrupt', `schema ${schema}`, 'not a planrun ledger');
    } finally {
      await schemas.drop(schema);
    }
  });

  it('a NUL character PostgreSQL cannot store in a text column is invalid_input and writes nothing', async () => {
    const ledger = await schemas.open({ clock: new ManualClock() });
    try {
      // Refused before it reaches the database, naming the field (shared validation)...
      await rejectsWith(ledger.submit(submitParams({ tenant: 'ac\u0000me' })), 'invalid_input', 'tenant');
      // ...and where none precedes it, the server's own refusal (SQLSTATE 22021) is invalid_input too.
      await rejectsWith(ledger.getJob('a\u0000b'), 'invalid_input', 'nothing was changed');
      const { job } = await ledger.submit(submitParams({ input: { text: 'a\u0000b' } }));
      assert.deepEqual(job.input, { text: 'a\u0000b' }, 'inside the JSON input a NUL is escaped and kept');
      assert.deepEqual(await ledger.countJobsByState(), { queued: 1, running: 0, finished: 0, failed: 0 });
    } finally {
      await ledger.close();
    }
  });

  it('two orchestrators racing grants for the same (job, attempt): exactly one wins each', async () => {
    await withSharedSchema(2, new ManualClock(), async ([a, b]) => {
      const jobs = [];
      for (let i = 0; i < 10; i++) jobs.push(await submitJob(a!));
      for (const job of jobs) {
        const racers = [a!, b!, a!, b!].map((ledger, i) => ({ ledger, worker: `w${i}` }));
        const results = await Promise.all(racers.map(({ ledger, worker }) => ledger.grantLease({ jobId: job.id, attempt: 1, worker })));
        const winners = results.flatMap((r, i) => (r.granted ? [racers[i]!.worker] : []));
        assert.equal(winners.length, 1, `exactly one grant of ${job.id}@1 wins, got ${JSON.stringify(results)}`);
        for (const r of results) if (!r.granted) assert.equal(r.reason, 'already_running');
        assert.equal((await b!.getJob(job.id))?.leaseHolder, winners[0]);
        assert.equal((await a!.getAttempts(job.id)).length, 1, 'one attempt record');
      }
    });
  });

  it('two orchestrators racing settles, sweeps and submits stay exactly-once', async () => {
    const clock = new ManualClock();
    await withSharedSchema(2, clock, async ([a, b]) => {
      // Settles of one attempt through both ledgers: one wins, one result row.
      const settled = await submitAndGrant(a!);
      const settles = await Promise.all([
        a!.settle({ ...settled.ref, outcome: finished({ by: 'a' }) }),
        b!.settle({ ...settled.ref, outcome: { kind: 'failed', error: errors.permanent } }),
      ]);
      assert.equal(settles.filter((r) => r.accepted).length, 1, JSON.stringify(settles));

      // Both sweepers at once: each expired lease moves exactly once.
      const leased = [];
      for (let i = 0; i < 8; i++) leased.push(await submitAndGrant(b!));
      clock.advance(90_000);
      const reports = await Promise.all([a!.sweep(), b!.sweep()]);
      const requeued = reports.flatMap((r) => r.requeued.map((x) => x.jobId)).sort();
      assert.deepEqual(requeued, leased.map((g) => g.job.id).sort(), 'every expired lease requeued exactly once');
      for (const g of leased) assert.equal((await a!.getJob(g.job.id))?.attempt, 2);

      // The same idempotency key through both at once: one job.
      const submits = await Promise.all([a!.submit(submitParams({ idempotencyKey: 'same' })), b!.submit(submitParams({ idempotencyKey: 'same' }))]);
      assert.equal(submits[0].job.id, submits[1].job.id);
      assert.deepEqual(submits.map((s) => s.created).sort(), [false, true]);

      // Batches naming the same keys in opposite orders wait on each other's inserts (a
      // deadlock PostgreSQL breaks by rolling one back); the loser runs again and finds the jobs.
      for (let round = 0; round < 5; round++) {
        const keys = [`k${round}-1`, `k${round}-2`, `k${round}-3`];
        const [x, y] = await Promise.all([
          a!.submitMany(keys.map((k) => submitParams({ idempotencyKey: k }))),
          b!.submitMany([...keys].reverse().map((k) => submitParams({ idempotencyKey: k }))),
        ]);
        assert.deepEqual(
          x.map((r) => r.job.id),
          [...y].reverse().map((r) => r.job.id),
          'one job per key',
        );
        assert.equal([...x, ...y].filter((r) => r.created).length, keys.length, 'each key created once');
      }

      const rows = [];
      for (;;) {
        const batch = await a!.outboxTake(100);
        if (batch.length === 0) break;
        rows.push(...batch);
        await b!.outboxMarkSent(batch.map((r) => r.id));
      }
      assert.equal(rows.filter((r) => r.kind === 'result' && r.jobId === settled.job.id).length, 1, 'one result row');
      assert.equal(rows.filter((r) => r.kind === 'work' && r.jobId === submits[0].job.id).length, 1, 'one work row for the key');
    });
  });

  it('three relays claiming the same outbox at once each take different rows, and together all of them', async () => {
    await withSharedSchema(3, new ManualClock(), async (ledgers) => {
      const jobs = await ledgers[0]!.submitMany(Array.from({ length: 300 }, () => submitParams()));
      const claimed: number[] = [];
      for (;;) {
        const batches = await Promise.all(ledgers.map((ledger) => ledger.outboxClaim({ limit: 25, claimMs: 60_000 })));
        if (batches.every((batch) => batch.length === 0)) break;
        claimed.push(...batches.flat().map((row) => row.id));
      }
      assert.equal(claimed.length, jobs.length, 'every row claimed');
      assert.equal(new Set(claimed).size, claimed.length, 'no row claimed twice');
    });
  });

  it('an unreachable server is ledger_unavailable, naming host, port and database but not the password', async () => {
    const error = await rejectsWith(
      openPostgresLedger({ connectionString: 'postgres://planrun:s3cret-pw@127.0.0.1:1/ledgerdb', connectionTimeoutMs: 2_000 }),
      'ledger_unavailable',
      '127.0.0.1:1/ledgerdb',
      'ECONNREFUSED',
    );
    assert.ok(!error.message.includes('s3cret-pw'), `the message shows the password: ${error.message}`);
  });

  it('a database that does not exist is ledger_unavailable, naming it', async () => {
    const url = new URL(postgresUrl);
    url.pathname = '/planrun_no_such_database';
    await rejectsWith(openPostgresLedger({ connectionString: url.toString() }), 'ledger_unavailable', 'planrun_no_such_database', 'does not exist');
  });

  it('refuses a bad schema name or timing config loudly', async () => {
    await rejectsWith(openPostgresLedger({ connectionString: postgresUrl, schema: 'x; DROP TABLE jobs' }), 'invalid_input', 'schema');
    await rejectsWith(
      openPostgresLedger({ connectionString: postgresUrl, schema: schemas.reserve(), config: { leaseTtlMs: -5 } }),
      'invalid_input',
      'leaseTtlMs',
    );
  });

  it('a storage failure during settle (disk full) fails the settle, rolls it back and announces nothing', async () => {
    await withSharedSchema(1, new ManualClock(), async ([ledger], schema) => {
      const g = await submitAndGrant(ledger!);
      const before = { job: await ledger!.getJob(g.job.id), attempts: await ledger!.getAttempts(g.job.id), outbox: await ledger!.outboxStats() };
      // The job's UPDATE succeeds, then the outbox insert hits a full disk: all of it must go.
      await schemas.admin.query(`
        CREATE FUNCTION ${schema}.disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END $$;
        CREATE TRIGGER outbox_disk_full BEFORE INSERT ON ${schema}.outbox FOR EACH ROW EXECUTE FUNCTION ${schema}.disk_full();`);
      await rejectsWith(ledger!.settle({ ...g.ref, outcome: finished() }), 'ledger_full', 'nothing was changed', `schema ${schema}`);
      assert.deepEqual(
        { job: await ledger!.getJob(g.job.id), attempts: await ledger!.getAttempts(g.job.id), outbox: await ledger!.outboxStats() },
        before,
        'the failed settle changed nothing',
      );
      await schemas.admin.query(`DROP TRIGGER outbox_disk_full ON ${schema}.outbox`);
      assert.equal((await ledger!.settle({ ...g.ref, outcome: finished() })).accepted, true, 'the connection is usable again');
    });
  });

  it('a cut network fails operations as ledger_unavailable, and the ledger recovers when it heals', async () => {
    const target = new URL(postgresUrl);
    const proxy = await FaultProxy.start({ host: target.hostname, port: Number(target.port || 5432) });
    const viaProxy = new URL(postgresUrl);
    viaProxy.port = String(proxy.port);
    const schema = schemas.reserve();
    const ledger = await openPostgresLedger({
      connectionString: viaProxy.toString(),
      schema,
      clock: new ManualClock(),
      connectionTimeoutMs: 500,
      queryTimeoutMs: 500,
    });
    try {
      const g = await submitAndGrant(ledger);
      proxy.blackhole();
      await rejectsWith(ledger.getJob(g.job.id), 'ledger_unavailable', `127.0.0.1:${proxy.port}`);
      await rejectsWith(ledger.renewLeases({ worker: 'w', leases: [g.ref] }), 'ledger_unavailable', `127.0.0.1:${proxy.port}`);
      proxy.heal();
      proxy.reset();
      // Broken connections are discarded; the next operations get fresh ones.
      const renewed = await ledger.renewLeases({ worker: 'w', leases: [g.ref] });
      assert.equal(renewed.renewed.length, 1, JSON.stringify(renewed));
      expectGranted(await ledger.grantLease({ jobId: (await submitJob(ledger)).id, attempt: 1, worker: 'w' }));
    } finally {
      await ledger.close();
      await proxy.close();
      await schemas.drop(schema);
    }
  });

  it('rejects operations after close with a typed error', async () => {
    const ledger = await schemas.open();
    await ledger.close();
    await rejectsWith(ledger.getJob('x'), 'ledger_closed', 'closed');
    await rejectsWith(ledger.submit(submitParams()), 'ledger_closed', 'closed');
  });
});
