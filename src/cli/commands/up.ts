import { join, relative } from 'node:path';
import type { Command } from 'commander';
import { createLogger } from '../../core/logger.js';
import { localKeyFile, localTenant } from '../../deploy/local-key.js';
import { LocalStack } from '../../deploy/local-stack.js';
import { defaultLedgerConfig } from '../../ledger/ledger.js';
import { describeLedger } from '../../ledger/open-ledger.js';
import { collect, durationOption, ledgerChoice, listOption, positiveIntOption } from '../options.js';

interface UpFlags {
  amqp?: string;
  ledger?: string;
  dataDir: string;
  host: string;
  port: number;
  workers: number;
  slots: number;
  jobs: string[];
  capabilities: string[];
  leaseTtl: number;
  heartbeatInterval: number;
  maxAttempts: number;
  backoff: number;
  sweepInterval: number;
  prefix: string;
}

export function registerUpCommand(program: Command): void {
  program
    .command('up')
    .description('run planrun on this machine: the orchestrator with its HTTP API, and supervised local workers')
    .option('--amqp <url>', 'RabbitMQ URL (or PLANRUN_AMQP_URL); without it, an embedded broker')
    .option('--ledger <sqlite|url>', 'the ledger: sqlite (in the data dir) or a postgres:// URL (or PLANRUN_LEDGER)')
    .option('--data-dir <dir>', 'where the ledger, the API keys and the outputs live', './.planrun')
    .option('--host <host>', 'where the HTTP API listens', '127.0.0.1')
    .option('--port <n>', 'the HTTP API port', positiveIntOption, 7700)
    .option('--workers <n>', 'local worker processes', positiveIntOption, 2)
    .option('--slots <n>', 'jobs each worker runs at once', positiveIntOption, 2)
    .option('--jobs <module>', 'a job-types module the workers load as well as the built-in types (repeatable)', collect, [])
    .option('--capabilities <list>', 'comma-separated capabilities of the local workers (ffmpeg is detected)', listOption, [])
    .option('--lease-ttl <duration>', 'how long a lease lasts without a heartbeat', durationOption, defaultLedgerConfig.leaseTtlMs)
    .option('--heartbeat-interval <duration>', 'how often workers renew their leases', durationOption, 30_000)
    .option('--max-attempts <n>', 'attempts per job unless its submission says otherwise', positiveIntOption, defaultLedgerConfig.defaultMaxAttempts)
    .option('--backoff <duration>', 'wait before attempt 2; doubles for each later attempt', durationOption, defaultLedgerConfig.backoffBaseMs)
    .option('--sweep-interval <duration>', 'how often expired leases and lost messages are swept', durationOption, 1_000)
    .option('--prefix <name>', 'prefix of every queue and exchange name', 'planrun')
    .action((flags: UpFlags) => runUp(flags));
}

async function runUp(flags: UpFlags): Promise<void> {
  // A terminal session wants the banner, not every log line; PLANRUN_LOG_LEVEL overrides.
  const logLevel = process.env.PLANRUN_LOG_LEVEL ?? 'warn';
  const logger = createLogger('planrun', logLevel);
  const amqp = flags.amqp ?? process.env.PLANRUN_AMQP_URL;
  const stack = await LocalStack.start({
    dataDir: flags.dataDir,
    ...ledgerChoice(flags.ledger),
    host: flags.host,
    port: flags.port,
    ...(amqp ? { amqp } : {}),
    workers: flags.workers,
    slots: flags.slots,
    jobs: flags.jobs,
    capabilities: flags.capabilities,
    ledgerConfig: {
      ...defaultLedgerConfig,
      leaseTtlMs: flags.leaseTtl,
      defaultMaxAttempts: flags.maxAttempts,
      backoffBaseMs: flags.backoff,
    },
    sweepIntervalMs: flags.sweepInterval,
    heartbeatIntervalMs: flags.heartbeatInterval,
    prefix: flags.prefix,
    logger,
    workerLogLevel: logLevel,
  });
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    console.log('planrun: stopping (workers finish their jobs first)…');
    await stack.stop();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop());
  process.on('SIGTERM', () => void stop());
  const dataDir = relative(process.cwd(), flags.dataDir) || '.';
  console.log(
    [
      'planrun is up',
      `  API       ${stack.url}   (OpenAPI ${stack.url}/openapi.json, metrics ${stack.url}/metrics)`,
      `  broker    ${stack.brokerDescription}`,
      `  ledger    ${describeLedger(ledgerChoice(flags.ledger).ledger, dataDir)}`,
      `  outputs   ${join(dataDir, 'outputs')}`,
      `  workers   ${flags.workers} × ${flags.slots} slots, restarted when they exit`,
      `  key       ${stack.key}   (tenant "${localTenant}", saved in ${join(dataDir, localKeyFile)})`,
      '',
      `Try:  npx planrun submit transcode --input '{}' --wait`,
      'Stop with Ctrl-C.',
    ].join('\n'),
  );
}
