/**
 * Section F: what the parts of one planrun job cost at least, each measured apart with
 * nothing else running, so the end-to-end figures of (3) and (4) can be read against
 * them. Each part is planrun's own code, driven directly:
 *
 * - the ledger's path of one job (SQLite, synchronous=FULL): submitted in bulk, its work
 *   message taken from the outbox and marked sent, its job row read and its lease granted,
 *   read again and settled, its result message taken and marked sent, with as many jobs at
 *   once as the throughput sections have slots (so the writes share group commits as they
 *   do there);
 * - one run in the child-process pool (a no-op job: the task out, the result back);
 * - one scratch folder made and removed.
 *
 * The cost of a message through the embedded broker is section (1e)'s.
 */
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import type { LeaseRef } from '../../src/ledger/ledger.js';
import { openSqliteLedger } from '../../src/ledger/sqlite/sqlite-ledger.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { ProcessPool } from '../../src/worker/runner/pool.js';
import { createScratch, removeScratch } from '../../src/worker/runner/scratch.js';
import { childPids, cpuMs, load1, procCpuMs } from './measure.js';
import { noopJobsModule, noopJobType } from './noop-jobs.js';
import type { BenchProfile } from './options.js';
import type { FloorsResult } from './results.js';

/** Calls `one(0)` … `one(count - 1)`, `parallel` calls at a time. */
async function inParallel(count: number, parallel: number, one: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (next < count) await one(next++);
    }),
  );
}

/** Runs `count` calls of `one`, `parallel` at a time, and returns the CPU per call of this process and its children. */
async function cpuPerCall(count: number, parallel: number, one: (i: number) => Promise<unknown>): Promise<number> {
  const processCpu = () => cpuMs() + childPids(process.pid).reduce((sum, pid) => sum + procCpuMs(pid), 0);
  const before = processCpu();
  await inParallel(count, parallel, one);
  return (processCpu() - before) / count;
}

async function ledgerPath(profile: BenchProfile, dir: string, parallel: number): Promise<number> {
  const ledger = await openSqliteLedger({ path: join(dir, 'ledger.db') });
  try {
    const drainOutbox = async () => {
      for (let rows = await ledger.outboxTake(profile.submitChunk); rows.length > 0; rows = await ledger.outboxTake(profile.submitChunk)) {
        await ledger.outboxMarkSent(rows.map((row) => row.id));
      }
    };
    const jobs = profile.jobs;
    const before = cpuMs();
    const ids: string[] = [];
    for (let sent = 0; sent < jobs; sent += profile.submitChunk) {
      const batch = Array.from({ length: Math.min(profile.submitChunk, jobs - sent) }, () => ({ tenant: 'bench', type: noopJobType, input: {} }));
      ids.push(...(await ledger.submitMany(batch)).map((r) => r.job.id));
    }
    await drainOutbox();
    const leases: LeaseRef[] = [];
    await inParallel(ids.length, parallel, async (i) => {
      const jobId = ids[i]!;
      // The orchestrator reads the job row (the tenant check) before each control request.
      await ledger.getJob(jobId, 'bench');
      const grant = await ledger.grantLease({ jobId, attempt: 1, worker: 'bench-worker' });
      if (!grant.granted) throw new Error(`benchmark: lease of ${jobId} refused (${grant.reason})`);
      leases.push({ jobId, attempt: 1, token: grant.token });
    });
    await inParallel(leases.length, parallel, async (i) => {
      const lease = leases[i]!;
      await ledger.getJob(lease.jobId, 'bench');
      const settled = await ledger.settle({ ...lease, outcome: { kind: 'finished', result: { data: null, outputs: {} } } });
      if (!settled.accepted) throw new Error(`benchmark: settle of ${lease.jobId} refused (${settled.reason})`);
    });
    await drainOutbox();
    return (cpuMs() - before) / jobs;
  } finally {
    await ledger.close();
  }
}

export async function measureFloors(profile: BenchProfile): Promise<FloorsResult> {
  const start = load1();
  const dir = tempDir('planrun-bench-floors-');
  const parallel = profile.workers * profile.slots;
  try {
    const ledgerCpuMsPerJob = await ledgerPath(profile, dir.path, parallel);

    const pool = new ProcessPool({ jobModules: [noopJobsModule], size: profile.slots });
    let childRunCpuMsPerJob: number;
    try {
      await pool.ready();
      const task = (i: number) => ({ jobId: `floor-${i}`, attempt: 1, tenant: 'bench', type: noopJobType, input: {}, scratchDir: dir.path });
      const run = async (i: number) => {
        const outcome = await pool.run(task(i), { onProgress: () => undefined });
        if (!outcome.ok) throw new Error(`benchmark: a no-op job failed in the pool: ${outcome.error.message}`);
      };
      await cpuPerCall(profile.warmupJobs, profile.slots, run);
      childRunCpuMsPerJob = await cpuPerCall(profile.jobs, profile.slots, run);
    } finally {
      await pool.close();
    }

    const scratchRoot = join(dir.path, 'scratch');
    const scratchCpuMsPerJob = await cpuPerCall(profile.jobs, profile.slots, async (i) => removeScratch(await createScratch(scratchRoot, `floor-${i}`, 1)));

    return { ledgerCpuMsPerJob, childRunCpuMsPerJob, scratchCpuMsPerJob, parallel, cores: availableParallelism(), load: [start, load1()] };
  } finally {
    dir.remove();
  }
}
