import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import { recorderFromEnv } from '../../chaos/recorder.js';
import { createLogger } from '../../core/logger.js';
import { locateFfmpeg } from '../../job-types/ffmpeg.js';
import { Topology } from '../../topology.js';
import { DirectoryOutputStore } from '../../worker/output-store.js';
import { loadJobTypeRegistry } from '../../worker/runner/job-type.js';
import { ProcessPool } from '../../worker/runner/pool.js';
import { Worker } from '../../worker/worker.js';
import { connectBroker } from '../broker-connection.js';
import { bytesOption, collect, durationOption, listOption, positiveIntOption } from '../options.js';

/** The job types planrun ships, loaded by every worker before any `--jobs` module. */
export const builtInJobTypesModule = fileURLToPath(new URL('../../job-types/index.js', import.meta.url));

/** Exit code of a worker stopped by a Fatal error: its supervisor should start a fresh one. */
export const fatalExitCode = 70;

interface WorkerFlags {
  amqp?: string;
  brokerSocket?: string;
  jobs: string[];
  slots: number;
  capabilities: string[];
  scratchDir: string;
  outputDir: string;
  heartbeatInterval: number;
  controlTimeout: number;
  stopGrace: number;
  abortGrace: number;
  outputReserve: number;
  prefix: string;
}

export function registerWorkerCommand(program: Command): void {
  program
    .command('worker')
    .description('run a worker: take work messages, lease each job, run it in a child process, store its outputs, settle it')
    .option('--amqp <url>', 'RabbitMQ URL (or PLANRUN_AMQP_URL)')
    .option('--broker-socket <path>', 'the embedded broker of a running `planrun up` (or PLANRUN_BROKER_SOCKET)')
    .option('--jobs <module>', 'a job-types module to load as well as the built-in types (repeatable)', collect, [])
    .option('--slots <n>', 'jobs run at once', positiveIntOption, 2)
    .option('--capabilities <list>', 'comma-separated capabilities this worker offers (e.g. ffmpeg,gpu)', listOption, [])
    .option('--scratch-dir <dir>', 'where each job gets its scratch folder', join(tmpdir(), 'planrun-scratch'))
    .option('--output-dir <dir>', 'the output store: where settled outputs are copied', './.planrun/outputs')
    .option('--heartbeat-interval <duration>', 'how often all leases are renewed', durationOption, 30_000)
    .option('--control-timeout <duration>', 'how long a control request waits for the orchestrator', durationOption, 5_000)
    .option('--stop-grace <duration>', 'on SIGTERM, how long running jobs may take to finish', durationOption, 30_000)
    .option('--abort-grace <duration>', 'how long an aborted job may take to stop before it is killed', durationOption, 10_000)
    .option('--output-reserve <size>', 'disk reserved per job whose type declares no reserve', bytesOption, 64 * 1024 * 1024)
    .option('--prefix <name>', 'prefix of every queue and exchange name', 'planrun')
    .action((flags: WorkerFlags) => runWorker(flags));
}

async function runWorker(flags: WorkerFlags): Promise<void> {
  const logger = createLogger('planrun-worker');
  const jobModules = [builtInJobTypesModule, ...flags.jobs.map((module) => resolve(module))];
  const registry = await loadJobTypeRegistry(jobModules);
  mkdirSync(flags.scratchDir, { recursive: true });
  const runner = new ProcessPool({ jobModules, size: flags.slots, abortGraceMs: flags.abortGrace, logger });
  await runner.ready();
  const connected = await connectBroker(flags, 'worker');
  // Only under the chaos runner (PLANRUN_CHAOS_HISTORY): records deliveries and the worker's events.
  const recorder = recorderFromEnv('worker');
  const broker = recorder?.wrapBroker(connected) ?? connected;
  const worker = new Worker({
    broker,
    topology: new Topology(flags.prefix),
    runner,
    jobTypes: [...registry.values()],
    slots: flags.slots,
    capabilities: detectCapabilities(flags.capabilities),
    scratchRoot: flags.scratchDir,
    outputStore: new DirectoryOutputStore(flags.outputDir),
    logger,
    defaultOutputReserveBytes: flags.outputReserve,
    timing: { heartbeatIntervalMs: flags.heartbeatInterval, controlTimeoutMs: flags.controlTimeout },
    onFatal: () => {
      void shutdown(fatalExitCode);
    },
  });

  recorder?.watchWorker(worker);

  let exiting = false;
  async function shutdown(code: number): Promise<void> {
    if (exiting) return;
    exiting = true;
    await worker.stop(flags.stopGrace).catch((error: unknown) => logger.error({ err: error }, 'worker stop failed'));
    await broker.close().catch(() => undefined);
    process.exit(code);
  }
  process.on('SIGTERM', () => void shutdown(0));
  process.on('SIGINT', () => void shutdown(0));
  await worker.start();
  // The id lets supervisors and tests match this process to its heartbeats and leases.
  logger.info({ worker: worker.id, pid: process.pid }, 'worker ready');
}

/** The declared capabilities, plus `ffmpeg` when an FFmpeg binary is found here. */
function detectCapabilities(declared: string[]): string[] {
  const capabilities = new Set(declared);
  if (locateFfmpeg() !== undefined) capabilities.add('ffmpeg');
  return [...capabilities];
}
