import { chmodSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { createLogger } from '../../core/logger.js';
import { locateFfmpeg } from '../../job-types/ffmpeg.js';
import { Topology } from '../../topology.js';
import { fatalExitCode } from '../../worker/exit-codes.js';
import { DirectoryOutputStore } from '../../worker/output-store.js';
import { ProcessPool } from '../../worker/runner/pool.js';
import { Worker } from '../../worker/worker.js';
import { amqpUrlFrom, queueTypeFrom } from '../amqp-url.js';
import { connectBroker } from '../broker-connection.js';
import { loadInstrument } from '../instrument.js';
import { checkJobModules } from '../job-modules.js';
import { sandboxPolicy } from '../sandbox-options.js';
import type { WorkerFlags } from './worker.js';

export async function runWorker(flags: WorkerFlags): Promise<void> {
  // Read once and taken out of the environment, so no process started below inherits it.
  const fleetKey = process.env.PLANRUN_FLEET_KEY || undefined;
  delete process.env.PLANRUN_FLEET_KEY;
  const amqpUrl = amqpUrlFrom(flags);
  delete process.env.PLANRUN_AMQP_URL;
  const queueType = queueTypeFrom(flags, amqpUrl);
  // Before anything starts: a module that cannot load is a usage error, not a crash loop.
  const { modules: jobModules, registry } = await checkJobModules(flags.jobs ?? []);
  // Only when PLANRUN_INSTRUMENT names one (the chaos runner's recorder): observes the broker and the worker.
  const instrument = await loadInstrument();
  const logger = createLogger('planrun-worker');
  // Job code must not see these even where a job module's folder holds them (the embedded broker's socket sits in the data dir).
  const brokerSocket = flags.brokerSocket ?? process.env.PLANRUN_BROKER_SOCKET;
  const hiddenPaths = [flags.scratchDir, flags.outputDir, ...(brokerSocket ? [dirname(brokerSocket)] : [])];
  const sandbox = sandboxPolicy(flags, hiddenPaths);
  mkdirSync(flags.scratchDir, { recursive: true });
  // Another user's job must reach its own scratch folder in here, and list no one else's.
  if (sandbox.jobUser) chmodSync(flags.scratchDir, 0o711);
  const runner = new ProcessPool({
    jobModules,
    size: flags.slots,
    abortGraceMs: flags.abortGrace,
    logger,
    sandbox,
    jobEnv: flags.jobEnv ?? [],
    scratchRoot: flags.scratchDir,
    ...(flags.jobTimeout === undefined ? {} : { jobTimeoutMs: flags.jobTimeout }),
  });
  await runner.ready();
  const connected = await connectBroker({ amqpUrl, queueType, ...(flags.brokerSocket ? { brokerSocket: flags.brokerSocket } : {}) }, 'worker');
  const broker = instrument?.wrapBroker?.(connected, 'worker') ?? connected;
  const worker = new Worker({
    broker,
    topology: new Topology(flags.prefix),
    runner,
    jobTypes: [...registry.values()],
    slots: flags.slots,
    capabilities: detectCapabilities(flags.capabilities ?? []),
    scratchRoot: flags.scratchDir,
    outputStore: new DirectoryOutputStore(flags.outputDir),
    logger,
    fleetKey,
    defaultOutputReserveBytes: flags.outputReserve,
    inputFetching: { maxInputBytes: flags.maxInputSize },
    timing: { heartbeatIntervalMs: flags.heartbeatInterval, controlTimeoutMs: flags.controlTimeout },
    onFatal: () => {
      void shutdown(fatalExitCode);
    },
  });

  instrument?.watchWorker?.(worker);

  let exiting = false;
  async function shutdown(code: number): Promise<void> {
    if (exiting) return;
    exiting = true;
    await worker.stop(flags.stopGrace).catch((error: unknown) => logger.error({ err: error }, 'worker stop failed'));
    await broker.close().catch(() => undefined);
    process.exit(code);
  }
  // The first signal drains (jobs get the stop grace, then are handed back); a second one
  // stops at once: every running job is handed back now and the process exits.
  let signals = 0;
  const onSignal = () => {
    signals += 1;
    if (signals === 1) return void shutdown(0);
    logger.warn({ worker: worker.id }, 'second stop signal: handing back running jobs and exiting now');
    void worker
      .stopNow()
      .catch((error: unknown) => logger.error({ err: error }, 'worker stop failed'))
      .finally(() => process.exit(0));
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  await worker.start();
  // The id lets supervisors and tests match this process to its heartbeats and leases.
  logger.info({ worker: worker.id, pid: process.pid, limits: runner.describeLimits() }, 'worker ready');
}

/** The declared capabilities, plus `ffmpeg` when an FFmpeg binary is found here. */
function detectCapabilities(declared: string[]): string[] {
  const capabilities = new Set(declared);
  if (locateFfmpeg() !== undefined) capabilities.add('ffmpeg');
  return [...capabilities];
}
