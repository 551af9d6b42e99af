/**
 * The long-job costs: what keeping many long jobs alive costs the orchestrator, apart
 * from running them (issue 16's sizes in the full profile: 100,000 leases across 1,000
 * workers, a 100,000-lease sweep, 1,000,000 queued jobs).
 *
 * - Heartbeats: `leases` running leases held by `workers` simulated workers; each
 *   interval every worker sends one heartbeat naming all its leases. The requests go
 *   through what the orchestrator does with a control message (JSON decode, protocol
 *   validation, the control handler, the ledger, JSON encode), all of one interval
 *   arriving together. Counted: ledger transactions (commits) and CPU per interval.
 * - Sweep: `leases` leases whose deadline has passed (a manual clock moved past the TTL);
 *   one ledger sweep pass big enough for all of them, and the orchestrator's own sweeper
 *   at its default per-pass limit (passes needed, their summed time), each on SQLite and
 *   on PostgreSQL.
 * - Queued: `queuedJobs` jobs submitted in big batches with no worker. With fair dispatch
 *   (the default) they wait in the ledger and no work message is sent; with fifo dispatch
 *   every one's work message is relayed into the embedded broker, which lives in the
 *   orchestrator's process: the orchestrator's peak and settled RSS, and its CPU while the
 *   backlog waits. Each mode in a fresh process.
 */
import { randomBytes } from 'node:crypto';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { EmbeddedBroker } from '../../src/broker/embedded.js';
import { EmbeddedBrokerStore } from '../../src/broker/embedded-store.js';
import { ManualClock, systemClock, type Clock } from '../../src/core/clock.js';
import { silentLogger } from '../../src/core/logger.js';
import { decode, encode } from '../../src/control/protocol.js';
import { defaultSweepLimit, type DispatchMode, type Ledger, type SubmitParams } from '../../src/ledger/ledger.js';
import { openPostgresLedger } from '../../src/ledger/postgres/postgres-ledger.js';
import { openSqliteLedger, sqliteLedgerStats } from '../../src/ledger/sqlite/sqlite-ledger.js';
import { ControlHandler } from '../../src/orchestrator/control-handler.js';
import { Fleet } from '../../src/orchestrator/fleet.js';
import { Orchestrator } from '../../src/orchestrator/orchestrator.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { Topology } from '../../src/topology.js';
import type { BenchEnvironment, BenchProfile } from './options.js';
import { cpuMs, hrNow, procStatusMiB, sleep, until } from './measure.js';
import { noopJobType } from './noop-jobs.js';
import type { HeartbeatResult, QueuedResult, SweepResult } from './results.js';

const leaseTtlMs = 90_000;
const job: SubmitParams = { tenant: 'bench', type: noopJobType, input: {} };

interface HeldLease {
  jobId: string;
  attempt: number;
  token: string;
  tenant: string;
}

/**
 * Grants issued together, as a busy control queue would: one group commit on SQLite, and
 * few enough that none waits past the PostgreSQL pool's connection timeout.
 */
const grantWave = 500;

/** Submits `count` jobs, `chunk` per submitMany, and leases them round robin to `workers` workers; returns each worker's leases. */
async function holdLeases(ledger: Ledger, count: number, workers: number, chunk: number): Promise<Map<string, HeldLease[]>> {
  const byWorker = new Map<string, HeldLease[]>();
  for (let w = 0; w < workers; w++) byWorker.set(`bench-worker-${w}`, []);
  for (let sent = 0; sent < count; sent += chunk) {
    const submitted = await ledger.submitMany(Array.from({ length: Math.min(chunk, count - sent) }, () => job));
    for (let wave = 0; wave < submitted.length; wave += grantWave) {
      await Promise.all(
        submitted.slice(wave, wave + grantWave).map(async ({ job: { id } }, i) => {
          const worker = `bench-worker-${(sent + wave + i) % workers}`;
          const grant = await ledger.grantLease({ jobId: id, attempt: 1, worker });
          if (!grant.granted) throw new Error(`benchmark: lease of ${id} refused (${grant.reason})`);
          byWorker.get(worker)!.push({ jobId: id, attempt: 1, token: grant.token, tenant: 'bench' });
        }),
      );
    }
  }
  return byWorker;
}

function transactions(ledger: Ledger): number {
  const stats = sqliteLedgerStats(ledger);
  if (!stats) throw new Error('benchmark: the ledger is not the SQLite one');
  return stats.transactions;
}

export async function measureHeartbeats(profile: BenchProfile): Promise<HeartbeatResult> {
  const dir = tempDir('planrun-bench-heartbeat-');
  // The ledger's time stands still: no lease runs out while a busy machine sets up the others.
  const clock = new ManualClock(Date.now());
  const ledger = await openSqliteLedger({ path: join(dir.path, 'ledger.db'), clock, config: { leaseTtlMs } });
  try {
    const byWorker = await holdLeases(ledger, profile.heartbeatLeases, profile.heartbeatWorkers, profile.bulkChunk);
    const handler = new ControlHandler(ledger, new Fleet(clock, 60_000), { leaseTtlMs });
    // What each worker sends, serialised once as it would be on the wire.
    const requests = [...byWorker].map(([worker, leases]) =>
      encode({ op: 'heartbeat', worker, secret: `secret-of-${worker}-in-the-bench`, jobTypes: [noopJobType], capabilities: [], slots: leases.length, leases }),
    );
    let txns = 0;
    let cpu = 0;
    let wall = 0;
    for (let interval = 0; interval < profile.heartbeatIntervals; interval++) {
      const txnsBefore = transactions(ledger);
      const cpuBefore = cpuMs();
      const t0 = hrNow();
      const replies = await Promise.all(requests.map(async (body) => encode(await handler.handle(decode(body)))));
      wall += hrNow() - t0;
      cpu += cpuMs() - cpuBefore;
      txns += transactions(ledger) - txnsBefore;
      const renewed = replies.reduce((sum, reply) => sum + (decode(reply) as { renewed: unknown[] }).renewed.length, 0);
      if (renewed !== profile.heartbeatLeases) throw new Error(`benchmark: ${renewed} of ${profile.heartbeatLeases} leases renewed`);
    }
    // The same interval with the heartbeats spread out (each answered before the next arrives).
    const spreadBefore = transactions(ledger);
    for (const body of requests) await handler.handle(decode(body));
    const transactionsSpread = transactions(ledger) - spreadBefore;
    const n = profile.heartbeatIntervals;
    return {
      transactionsPerIntervalSpread: transactionsSpread,
      leases: profile.heartbeatLeases,
      workers: profile.heartbeatWorkers,
      intervals: n,
      transactionsPerInterval: txns / n,
      cpuMsPerInterval: cpu / n,
      wallMsPerInterval: wall / n,
    };
  } finally {
    await ledger.close();
    dir.remove();
  }
}

/**
 * The sweep rows expire leases whose holders stopped heartbeating; the leases are granted
 * and never renewed, which the abandoned-grant window would take back first as grants
 * never taken up: without it, they run out with their TTL as a dead worker's do.
 */
const sweptLeaseConfig = { leaseTtlMs, grantWindowMs: null };

/**
 * A ledger and the one its leases are set up through: the same one on SQLite; on
 * PostgreSQL, a second ledger on the same schema that commits without waiting for the
 * disk (synchronous_commit off), or 100,000 grants, each a transaction, would take the
 * section many minutes. What is timed runs on the first, committed as in production.
 */
interface SweptLedger {
  ledger: Ledger;
  setup: Ledger;
}

/** One pass expiring every lease of a fresh ledger, timed. */
async function timeOnePass({ ledger, setup }: SweptLedger, clock: ManualClock, profile: BenchProfile): Promise<number> {
  await holdLeases(setup, profile.sweepLeases, profile.heartbeatWorkers, profile.bulkChunk);
  clock.advance(leaseTtlMs + 1);
  const t0 = hrNow();
  const report = await ledger.sweep({ limit: profile.sweepLeases });
  const ms = hrNow() - t0;
  if (report.requeued.length !== profile.sweepLeases) throw new Error(`benchmark: the sweep requeued ${report.requeued.length} leases`);
  return ms;
}

/** The orchestrator's sweeper (its dispatcher's passes, at the default limit, with what it does after each) expiring every lease of a fresh ledger. */
async function timeSweeper(
  { ledger, setup }: SweptLedger,
  clock: ManualClock,
  profile: BenchProfile,
): Promise<{ passes: number; totalMs: number; limit: number }> {
  await holdLeases(setup, profile.sweepLeases, profile.heartbeatWorkers, profile.bulkChunk);
  clock.advance(leaseTtlMs + 1);
  const orchestrator = new Orchestrator({
    ledger,
    broker: new EmbeddedBroker({ clock }).connect(),
    topology: new Topology(`bench${randomBytes(4).toString('hex')}`),
    logger: silentLogger(),
    leaseTtlMs,
    clock,
  });
  let passes = 0;
  let expired = 0;
  let limit = 0;
  const t0 = hrNow();
  for (;;) {
    const pass = await orchestrator.dispatcher.runOnce();
    const n = pass.requeued.length + pass.exhausted.length + pass.cancelled.length;
    if (n === 0) break;
    passes++;
    expired += n;
    limit = Math.max(limit, n);
  }
  const totalMs = hrNow() - t0;
  if (expired !== profile.sweepLeases) throw new Error(`benchmark: the sweeper expired ${expired} leases`);
  return { passes, totalMs, limit };
}

export async function measureSweep(profile: BenchProfile, env: BenchEnvironment): Promise<SweepResult> {
  const dir = tempDir('planrun-bench-sweep-');
  const clock = new ManualClock(Date.now());
  const ledgers: Ledger[] = [];
  const sqlite = async (name: string): Promise<SweptLedger> => {
    const ledger = await openSqliteLedger({ path: join(dir.path, name), clock, config: sweptLeaseConfig });
    ledgers.push(ledger);
    return { ledger, setup: ledger };
  };
  try {
    // One ledger sweep pass with room for every expired lease.
    const onePassMs = await timeOnePass(await sqlite('one-pass.db'), clock, profile);
    const postgresOnePassMs = await onPostgres(env.postgresUrl, clock, (ledger) => timeOnePass(ledger, clock, profile));
    // The orchestrator's sweeper as it runs every interval.
    const sweeper = await timeSweeper(await sqlite('sweeper.db'), clock, profile);
    const postgresSweeper = await onPostgres(env.postgresUrl, clock, (ledger) => timeSweeper(ledger, clock, profile));
    return {
      leases: profile.sweepLeases,
      onePassMs,
      postgresOnePassMs,
      sweeperPasses: sweeper.passes,
      sweeperTotalMs: sweeper.totalMs,
      sweeperLimit: sweeper.limit,
      postgresSweeperPasses: postgresSweeper.passes,
      postgresSweeperTotalMs: postgresSweeper.totalMs,
    };
  } finally {
    for (const ledger of ledgers) await ledger.close();
    dir.remove();
  }
}

/** The queued section's redispatch period and sweep interval: short, so that a run sees many periods pass. */
const queuedRedispatchMs = 2_000;
const queuedSweepIntervalMs = 100;

export async function measureQueued(profile: BenchProfile, dispatch: DispatchMode): Promise<QueuedResult> {
  const jobs = dispatch === 'fair' ? profile.queuedJobs : profile.queuedJobsFifo;
  const dir = tempDir('planrun-bench-queued-');
  const clock: Clock = systemClock;
  const ledgerPath = join(dir.path, 'ledger.db');
  const ledger = await openSqliteLedger({ path: ledgerPath, clock, config: { redispatchAfterMs: queuedRedispatchMs, dispatch } });
  // As `planrun up` runs it: every work message stored as well as held.
  const core = new EmbeddedBroker({ store: EmbeddedBrokerStore.open(join(dir.path, 'broker.db')) });
  const topology = new Topology(`bench${randomBytes(4).toString('hex')}`);
  const orchestrator = new Orchestrator({
    ledger,
    broker: core.connect(),
    topology,
    logger: silentLogger(),
    leaseTtlMs: 90_000,
    sweepIntervalMs: queuedSweepIntervalMs,
  });
  try {
    await orchestrator.start();
    const t0 = hrNow();
    for (let sent = 0; sent < jobs; sent += profile.bulkChunk) {
      await orchestrator.submitMany(Array.from({ length: Math.min(profile.bulkChunk, jobs - sent) }, () => job));
    }
    const submitSeconds = (hrNow() - t0) / 1000;
    let unsent = -1;
    const poll = async () => (unsent = (await ledger.outboxStats()).unsent);
    await poll();
    await until('the relay to publish every work message', () => (void poll(), unsent === 0), profile.sectionTimeoutMs, 50);
    await sleep(500);
    global.gc?.();
    const settledRssMiB = procStatusMiB('self', 'VmRSS') ?? Number.NaN;
    // Then the jobs wait, with no worker, while the sweeper passes over them (each past its
    // redispatch period, twice, when the profile gives it the time).
    const waitMs = Math.min(profile.queuedWaitMaxMs, 2 * (queuedRedispatchMs + Math.ceil(jobs / defaultSweepLimit) * queuedSweepIntervalMs));
    const cpuBefore = cpuMs();
    await sleep(waitMs);
    const waitCpuMsPerSecond = (cpuMs() - cpuBefore) / (waitMs / 1000);
    return {
      dispatch,
      jobs,
      submitChunk: profile.bulkChunk,
      peakRssMiB: procStatusMiB('self', 'VmHWM') ?? Number.NaN,
      settledRssMiB,
      submitSeconds,
      waitedSeconds: waitMs / 1000,
      redispatchAfterSeconds: queuedRedispatchMs / 1000,
      waitCpuMsPerSecond,
      ledgerMiB: (fileSize(ledgerPath) + fileSize(`${ledgerPath}-wal`)) / 2 ** 20,
      messagesHeld: core.routedMessages,
    };
  } finally {
    await orchestrator.stop();
    await core.close();
    await ledger.close();
    dir.remove();
  }
}

function fileSize(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}

/** Runs `body` on a PostgreSQL ledger in a schema of its own (and its setup ledger: SweptLedger), dropped afterwards. */
async function onPostgres<T>(url: string, clock: ManualClock, body: (ledger: SweptLedger) => Promise<T>): Promise<T> {
  const schema = `planrun_bench_${randomBytes(4).toString('hex')}`;
  const ledger = await openPostgresLedger({ connectionString: url, schema, clock, config: sweptLeaseConfig });
  const unsynced = `${url}${url.includes('?') ? '&' : '?'}options=${encodeURIComponent('-c synchronous_commit=off')}`;
  const setup = await openPostgresLedger({ connectionString: unsynced, schema, clock, config: sweptLeaseConfig, poolSize: 20 });
  try {
    return await body({ ledger, setup });
  } finally {
    await setup.close();
    await ledger.close();
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    } finally {
      await admin.end();
    }
  }
}
