import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import { defaultInputFetching } from '../../worker/inputs/job-inputs.js';
import { addAmqpOptions, type AmqpFlags } from '../amqp-url.js';
import { collect, durationFlag, listOption, positiveIntOption, sizeFlag } from '../options.js';
import { addSandboxOptions, type SandboxFlags } from '../sandbox-options.js';

/** The job types planrun ships, loaded by every worker before any `--jobs` module. */
export const builtInJobTypesModule = fileURLToPath(new URL('../../job-types/index.js', import.meta.url));

export interface WorkerFlags extends AmqpFlags, SandboxFlags {
  brokerSocket?: string;
  jobs?: string[];
  slots: number;
  capabilities?: string[];
  scratchDir: string;
  outputDir: string;
  heartbeatInterval: number;
  controlTimeout: number;
  stopGrace: number;
  abortGrace: number;
  outputReserve: number;
  maxInputSize: number;
  prefix: string;
}

export function registerWorkerCommand(program: Command): void {
  addSandboxOptions(
    addAmqpOptions(
      program.command('worker').description('run a worker: take work messages, lease each job, run it in a child process, store its outputs, settle it'),
    ),
  )
    .option('--broker-socket <path>', 'the embedded broker of a running `planrun up` or `planrun orchestrator --broker-socket` (or PLANRUN_BROKER_SOCKET)')
    .option('--jobs <module>', 'a job-types module to load as well as the built-in types (repeatable)', collect)
    .option('--slots <n>', 'jobs run at once', positiveIntOption, 2)
    .option('--capabilities <list>', 'comma-separated capabilities this worker offers (e.g. ffmpeg,gpu)', listOption)
    .option('--scratch-dir <dir>', 'where each job gets its scratch folder', join(tmpdir(), 'planrun-scratch'))
    .option('--output-dir <dir>', 'the output store: where settled outputs are copied', './.planrun/outputs')
    .addOption(durationFlag('--heartbeat-interval <duration>', 'how often all leases are renewed', 30_000))
    .addOption(durationFlag('--control-timeout <duration>', 'how long a control request waits for the orchestrator', 5_000))
    .addOption(durationFlag('--stop-grace <duration>', 'on SIGTERM, how long running jobs may take to finish', 30_000))
    .addOption(durationFlag('--abort-grace <duration>', 'how long an aborted job may take to stop before it is killed', 10_000))
    .addOption(sizeFlag('--output-reserve <size>', 'disk reserved per job whose type declares no reserve', 64 * 1024 * 1024))
    .addOption(
      sizeFlag('--max-input-size <size>', 'largest input file fetched by URL for a job whose type sets no maxInputBytes', defaultInputFetching.maxInputBytes),
    )
    .option('--prefix <name>', 'prefix of every queue and exchange name', 'planrun')
    .action(async (flags: WorkerFlags) => (await import('./worker-action.js')).runWorker(flags));
}
