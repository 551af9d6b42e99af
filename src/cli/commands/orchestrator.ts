import { join } from 'node:path';
import type { Command } from 'commander';
import { RabbitMqBroker } from '../../broker/rabbitmq.js';
import { createLogger } from '../../core/logger.js';
import { defaultLedgerConfig } from '../../ledger/ledger.js';
import { openSqliteLedger } from '../../ledger/sqlite/sqlite-ledger.js';
import { Orchestrator } from '../../orchestrator/orchestrator.js';
import { Topology } from '../../topology.js';
import { amqpUrl, durationOption, positiveIntOption, UsageError } from '../options.js';

interface OrchestratorFlags {
  amqp?: string;
  dataDir: string;
  leaseTtl: number;
  maxAttempts: number;
  backoff: number;
  sweepInterval: number;
  redispatchAfter: number;
  prefix: string;
}

export function registerOrchestratorCommand(program: Command): void {
  program
    .command('orchestrator')
    .description('run the orchestrator: the ledger, the control plane, the outbox relay and the sweeper')
    .option('--amqp <url>', 'RabbitMQ URL (or PLANRUN_AMQP_URL)')
    .option('--data-dir <dir>', 'where the SQLite ledger lives', './.planrun')
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
  const ledger = await openSqliteLedger({
    path: join(flags.dataDir, 'ledger.db'),
    config: {
      leaseTtlMs: flags.leaseTtl,
      defaultMaxAttempts: flags.maxAttempts,
      backoffBaseMs: flags.backoff,
      redispatchAfterMs: flags.redispatchAfter,
    },
  });
  const broker = await RabbitMqBroker.connect({ url });
  const orchestrator = new Orchestrator({
    ledger,
    broker,
    topology: new Topology(flags.prefix),
    logger,
    leaseTtlMs: flags.leaseTtl,
    sweepIntervalMs: flags.sweepInterval,
  });
  let exiting = false;
  async function shutdown(): Promise<void> {
    if (exiting) return;
    exiting = true;
    await orchestrator.stop().catch((error: unknown) => logger.error({ err: error }, 'orchestrator stop failed'));
    await broker.close().catch(() => undefined);
    await ledger.close();
    process.exit(0);
  }
  process.on('SIGTERM', () => void shutdown());
  process.on('SIGINT', () => void shutdown());
  await orchestrator.start();
  logger.info({ pid: process.pid, dataDir: flags.dataDir }, 'orchestrator ready');
}
