import { RabbitMqBroker } from '../../broker/rabbitmq.js';
import { recorderFromEnv } from '../../chaos/recorder.js';
import { createLogger } from '../../core/logger.js';
import { OrchestratorService } from '../../deploy/orchestrator-service.js';
import { defaultLedgerConfig } from '../../ledger/ledger.js';
import { Topology } from '../../topology.js';
import { amqpUrl, ledgerChoice, UsageError } from '../options.js';
import type { OrchestratorFlags } from './orchestrator.js';

export async function runOrchestrator(flags: OrchestratorFlags): Promise<void> {
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
