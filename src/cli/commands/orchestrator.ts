import type { Command } from 'commander';
import { RabbitMqBroker } from '../../broker/rabbitmq.js';
import { recorderFromEnv } from '../../chaos/recorder.js';
import { createLogger } from '../../core/logger.js';
import { defaultLedgerConfig } from '../../ledger/ledger.js';
import { OrchestratorService } from '../../deploy/orchestrator-service.js';
import { Topology } from '../../topology.js';
import { amqpUrl, durationOption, ledgerChoice, positiveIntOption, UsageError } from '../options.js';

interface OrchestratorFlags {
  amqp?: string;
  ledger?: string;
  dataDir: string;
  leaseTtl: number;
  maxAttempts: number;
  backoff: number;
  sweepInterval: number;
  redispatchAfter: number;
  prefix: string;
  host: string;
  port: number;
}

export function registerOrchestratorCommand(program: Command): void {
  program
    .command('orchestrator')
    .description('run the orchestrator: the ledger, the control plane, the outbox relay, the sweeper and the HTTP API')
    .option('--amqp <url>', 'RabbitMQ URL (or PLANRUN_AMQP_URL)')
    .option('--ledger <sqlite|url>', 'the ledger: sqlite (in the data dir) or a postgres:// URL (or PLANRUN_LEDGER)')
    .option('--data-dir <dir>', 'where the SQLite ledger and the API keys live', './.planrun')
    .option('--host <host>', 'where the HTTP API listens', '127.0.0.1')
    .option('--port <n>', 'the HTTP API port', positiveIntOption, 7700)
    .option('--lease-ttl <duration>', 'how long a lease lasts without a heartbeat', durationOption, defaultLedgerConfig.leaseTtlMs)
    .option('--max-attempts <n>', 'attempts per job unless its submission says otherwise', positiveIntOption, defaultLedgerConfig.defaultMaxAttempts)
    .option('--backoff <duration>', 'wait before attempt 2; doubles for each later attempt', durationOption, defaultLedgerConfig.backoffBaseMs)
    .option('--sweep-interval <duration>', 'how often expired leases and lost messages are swept', durationOption, 1_000)
    .option('--redispatch-after <duration>', 'a queued job whose work message went unleased this long gets it again', durationOption, defaultLedgerConfig.redispatchAfterMs)
    .option('--prefix <name>', 'prefix of every queue and exchange name', 'planrun')
    .action((flags: OrchestratorFlags) => runOrchestrator(flags));
}

async function runOrchestrator(flags: OrchestratorFlags): Promise<void> {
  const url = amqpUrl(flags.amqp);
  if (!url) {
    throw new UsageError('planrun orchestrator needs RabbitMQ: pass --amqp URL or set PLANRUN_AMQP_URL (planrun up runs on its embedded broker)');
  }
  const logger = createLogger('planrun-orchestrator');
  const connected = await RabbitMqBroker.connect({ url });
  // Only under the chaos runner (PLANRUN_CHAOS_HISTORY): records control answers and publishes.
  const broker = recorderFromEnv('orchestrator')?.wrapBroker(connected) ?? connected;
  const service = await OrchestratorService.start({
    dataDir: flags.dataDir,
    ...ledgerChoice(flags.ledger),
    broker,
    topology: new Topology(flags.prefix),
    logger,
    ledgerConfig: {
      ...defaultLedgerConfig,
      leaseTtlMs: flags.leaseTtl,
      defaultMaxAttempts: flags.maxAttempts,
      backoffBaseMs: flags.backoff,
      redispatchAfterMs: flags.redispatchAfter,
    },
    sweepIntervalMs: flags.sweepInterval,
    host: flags.host,
    port: flags.port,
  });
  let exiting = false;
  async function shutdown(): Promise<void> {
    if (exiting) return;
    exiting = true;
    await service.stop().catch((error: unknown) => logger.error({ err: error }, 'orchestrator stop failed'));
    await broker.close().catch(() => undefined);
    process.exit(0);
  }
  process.on('SIGTERM', () => void shutdown());
  process.on('SIGINT', () => void shutdown());
  logger.info({ pid: process.pid, dataDir: flags.dataDir, url: service.url }, `orchestrator ready; HTTP API on ${service.url}`);
}
