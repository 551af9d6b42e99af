/**
 * Runs one benchmark section in a process of its own (so its peak RSS is its own, and no
 * section warms or pollutes the next), and sends the result to the parent over IPC.
 */
import { runBullmq } from './bullmq.js';
import { measureFloors } from './floors.js';
import { measureHeartbeats, measureQueued, measureSweep } from './long-jobs.js';
import { load1 } from './measure.js';
import type { SectionRequest } from './options.js';
import { runPlanrun } from './planrun-e2e.js';
import type { SectionResult } from './results.js';
import { runTransport } from './transport.js';
import { runEmbeddedTransport } from './transport-embedded.js';

async function run(request: SectionRequest): Promise<SectionResult> {
  const { profile, env, cpuProfileDir } = request;
  switch (request.section) {
    case 'transport':
      return runTransport(profile, env, cpuProfileDir);
    case 'transport-embedded':
      return runEmbeddedTransport(profile, cpuProfileDir);
    case 'bullmq-memory':
      return runBullmq(profile, env, 'memory', cpuProfileDir);
    case 'bullmq-fsync':
      return runBullmq(profile, env, 'fsync', cpuProfileDir);
    case 'bullmq-sandboxed':
      return runBullmq(profile, env, 'memory', cpuProfileDir, 'sandboxed');
    case 'bullmq-sandboxed-fsync':
      return runBullmq(profile, env, 'fsync', cpuProfileDir, 'sandboxed');
    case 'planrun-embedded':
      return runPlanrun(profile, env, 'embedded', cpuProfileDir);
    case 'planrun-rabbitmq':
      return runPlanrun(profile, env, 'rabbitmq', cpuProfileDir);
    case 'planrun-embedded-postgres':
      return runPlanrun(profile, env, 'embedded', cpuProfileDir, { kind: 'postgres', orchestrators: 1 });
    case 'planrun-postgres-1':
      return runPlanrun(profile, env, 'rabbitmq', cpuProfileDir, { kind: 'postgres', orchestrators: 1 });
    case 'planrun-postgres-2':
      return runPlanrun(profile, env, 'rabbitmq', cpuProfileDir, { kind: 'postgres', orchestrators: 2 });
    case 'planrun-postgres-3':
      return runPlanrun(profile, env, 'rabbitmq', cpuProfileDir, { kind: 'postgres', orchestrators: 3 });
    case 'leases': {
      const start = load1();
      const heartbeat = await measureHeartbeats(profile);
      const sweep = await measureSweep(profile, env);
      return { heartbeat, sweep, load: [start, load1()] };
    }
    case 'floors':
      return measureFloors(profile);
    case 'queued':
    case 'queued-fifo': {
      const start = load1();
      const queued = await measureQueued(profile, request.section === 'queued' ? 'fair' : 'fifo');
      return { queued, load: [start, load1()] };
    }
  }
}

const request = JSON.parse(process.argv[2] ?? '{}') as SectionRequest;
run(request).then(
  (result) => process.send!({ ok: true, result }, undefined, undefined, () => process.exit(0)),
  (error: unknown) =>
    process.send!({ ok: false, error: error instanceof Error ? (error.stack ?? error.message) : String(error) }, undefined, undefined, () => process.exit(1)),
);
