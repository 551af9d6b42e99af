/**
 * CI smoke check of the benchmark: the quick profile with tiny counts, every section,
 * nothing written. It asserts only that each section produced a figure: CI machines are
 * shared and busy, so the figures themselves are not judged here (docs/benchmarks.md
 * holds a real run's).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runBench } from './bench.js';
import { quickProfile, sectionNames, type BenchProfile } from './options.js';
import type { FloorsResult, LeasesResult, QueuedSectionResult, ThroughputResult } from './results.js';

const tiny: BenchProfile = {
  ...quickProfile,
  transportMessages: 500,
  jobs: 100,
  warmupJobs: 20,
  latencySamples: 5,
  workers: 1,
  slots: 2,
  submitChunk: 50,
  heartbeatLeases: 200,
  heartbeatWorkers: 4,
  heartbeatIntervals: 1,
  sweepLeases: 200,
  queuedJobs: 500,
  queuedJobsFifo: 500,
  bulkChunk: 50,
  queuedWaitMaxMs: 3_000,
  sectionTimeoutMs: 60_000,
};

const positive = (value: number | undefined, what: string) =>
  assert.ok(value !== undefined && Number.isFinite(value) && value > 0, `${what} should be a positive figure, got ${value}`);

describe('benchmark (smoke)', () => {
  it('every section of the quick profile produces its figures', { timeout: 600_000 }, async () => {
    const { run, table } = await runBench({ profile: tiny, command: 'bench-smoke.test' });
    for (const name of sectionNames) {
      const section = run.sections[name];
      assert.ok(section, `section ${name} ran`);
      assert.ok(!('error' in section), `section ${name} failed: ${'error' in section ? section.error : ''}`);
    }
    for (const name of [
      'transport',
      'transport-embedded',
      'bullmq-memory',
      'bullmq-fsync',
      'bullmq-sandboxed',
      'bullmq-sandboxed-fsync',
      'planrun-embedded',
      'planrun-rabbitmq',
      'planrun-embedded-postgres',
      'planrun-postgres-1',
      'planrun-postgres-2',
      'planrun-postgres-3',
    ] as const) {
      const result = run.sections[name] as ThroughputResult;
      positive(result.perSecond, `${name} throughput`);
      positive(result.latency.p50Ms, `${name} p50`);
      positive(result.latency.p99Ms, `${name} p99`);
      positive(result.workerRssMiB, `${name} worker RSS`);
    }
    for (const name of [
      'planrun-embedded',
      'planrun-rabbitmq',
      'planrun-embedded-postgres',
      'planrun-postgres-1',
      'planrun-postgres-2',
      'planrun-postgres-3',
    ] as const) {
      const result = run.sections[name] as ThroughputResult;
      positive(result.orchestratorRssMiB, `${name} orchestrator RSS`);
      positive(result.orchestratorCpuMsPerJob, `${name} orchestrator CPU per job`);
      if (!name.includes('postgres')) positive(result.transactionsPerJob, `${name} transactions per job`);
      assert.ok(!result.notes.some((note) => note.includes('FAILED')), `${name}: ${result.notes.join('; ')}`);
    }
    const { heartbeat, sweep } = run.sections.leases as LeasesResult;
    positive(heartbeat.transactionsPerInterval, 'heartbeat transactions');
    positive(heartbeat.cpuMsPerInterval, 'heartbeat CPU');
    positive(sweep.onePassMs, 'sweep pass');
    positive(sweep.postgresOnePassMs, 'sweep pass on PostgreSQL');
    positive(sweep.sweeperPasses, 'sweeper passes');
    positive(sweep.postgresSweeperPasses, 'sweeper passes on PostgreSQL');
    const { queued } = run.sections.queued as QueuedSectionResult;
    positive(queued.peakRssMiB, 'queued RSS');
    // Fair dispatch (the default since f06209a) releases a work message only to a free slot:
    // with no worker the jobs wait in the ledger, and the sweeper has nothing to send again.
    assert.equal(queued.messagesHeld, 0, 'no work message released while no worker has a free slot, however long the jobs wait');
    // Fifo sends each job's work message at submit, and no copy while no worker stands idle.
    const { queued: fifo } = run.sections['queued-fifo'] as QueuedSectionResult;
    positive(fifo.peakRssMiB, 'queued RSS (fifo)');
    assert.equal(fifo.messagesHeld, tiny.queuedJobsFifo, 'one work message per job with fifo dispatch, no copies');
    positive((run.sections['planrun-embedded'] as ThroughputResult).brokerMessagesPerJob, 'messages routed per job');
    const floors = run.sections.floors as FloorsResult;
    positive(floors.ledgerCpuMsPerJob, 'ledger floor');
    positive(floors.childRunCpuMsPerJob, 'child-process run floor');
    positive(floors.scratchCpuMsPerJob, 'scratch floor');
    assert.match(table, /\| F \|.*at most [\d,]+ jobs\/s on \d+ cores/, 'the floors row gives the ceiling');
    for (const row of [
      '| 1 |',
      '| 1e |',
      '| 2 |',
      '| 2f |',
      '| 2s |',
      '| 2sf |',
      '| 3 |',
      '| 4 |',
      '| 3pg |',
      '| (3pg)/(3) |',
      '| (5.1)/(4) |',
      '| (3)/(2) |',
      '| (3)/(2s) |',
      '| (3)/(2sf) |',
      '| (4)/(2sf) |',
      '| (3)/(F) |',
      '| (4)/(1) |',
      '| 5.1 |',
      '| 5.2 |',
      '| 5.3 |',
      '| (5.3)/(5.1) |',
      '| L1 |',
      '| L2 |',
      '| L3 |',
      '| L3f |',
      '| F |',
    ]) {
      assert.ok(table.includes(row), `the table has row ${row}`);
    }
  });
});
