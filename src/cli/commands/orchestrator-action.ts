import type { Broker } from '../../broker/broker.js';
import { RabbitMqBroker } from '../../broker/rabbitmq.js';
import { createLogger } from '../../core/logger.js';
import { EmbeddedBrokerService } from '../../deploy/embedded-broker-service.js';
import { OrchestratorService } from '../../deploy/orchestrator-service.js';
import { defaultLedgerConfig } from '../../ledger/ledger.js';
import { Topology } from '../../topology.js';
import { loadInstrument } from '../instrument.js';
import { amqpUrlFrom, queueTypeFrom } from '../amqp-url.js';
import { ledgerChoice, metricsListener, UsageError } from '../options.js';
import { grantWindowMsFrom, retainMsFrom, submitTenantFrom } from '../service-options.js';
import { objectStoreFrom, storeCleanupFrom } from '../store-options.js';
import type { OrchestratorFlags } from './orchestrator.js';

export async function runOrchestrator(flags: OrchestratorFlags): Promise<void> {
  const url = amqpUrlFrom(flags);
  if (url && flags.brokerSocket) throw new UsageError('planrun orchestrator takes --amqp (RabbitMQ) or --broker-socket (embedded broker), not both');
  if (!url && !flags.brokerSocket) {
    throw new UsageError(
      'planrun orchestrator needs a broker: --amqp-file PATH, PLANRUN_AMQP_URL or --amqp URL for RabbitMQ, or --broker-socket PATH to run the embedded one',
    );
  }
  if (url && flags.consumerTimeout !== undefined) {
    throw new UsageError("--consumer-timeout applies to the embedded broker (--broker-socket); RabbitMQ's is consumer_timeout in its own config");
  }
  const queueType = queueTypeFrom(flags, url);
  const submitTenant = submitTenantFrom(flags, url !== undefined);
  const objectStore = await objectStoreFrom(flags);
  const storeCleanup = storeCleanupFrom(flags);
  // Only when PLANRUN_INSTRUMENT names one (the chaos runner's recorder): observes the broker.
  const instrument = await loadInstrument();
  const logger = createLogger('planrun-orchestrator');
  const embedded = flags.brokerSocket
    ? await EmbeddedBrokerService.start(flags.dataDir, {
        socketPath: flags.brokerSocket,
        ...(flags.consumerTimeout === undefined ? {} : { consumerTimeoutMs: flags.consumerTimeout }),
      })
    : undefined;
  const connected: Broker = embedded ? embedded.broker.connect() : await RabbitMqBroker.connect({ url: url!, queueType });
  const broker = instrument?.wrapBroker?.(connected, 'orchestrator') ?? connected;
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
      dispatch: flags.dispatch,
      redispatchAfterMs: flags.redispatchAfter,
      ...grantWindowMsFrom(flags),
    },
    sweepIntervalMs: flags.sweepInterval,
    host: flags.host,
    port: flags.port,
    fleetKey: process.env.PLANRUN_FLEET_KEY || undefined,
    submitTenant,
    objectStore,
    storeCleanup,
    ...retainMsFrom(flags),
    metricsTenantLabel: flags.metricsTenantLabel ?? false,
    ...metricsListener(flags),
    rateLimit: flags.rateLimit,
  });
  let exiting = false;
  async function shutdown(): Promise<void> {
    if (exiting) return;
    exiting = true;
    await service.stop().catch((error: unknown) => logger.error({ err: error }, 'orchestrator stop failed'));
    await broker.close().catch(() => undefined);
    await embedded?.stop().catch((error: unknown) => logger.error({ err: error }, 'embedded broker stop failed'));
    process.exit(0);
  }
  process.on('SIGTERM', () => void shutdown());
  process.on('SIGINT', () => void shutdown());
  logger.info(
    {
      pid: process.pid,
      dataDir: flags.dataDir,
      url: service.url,
      dashboard: `${service.url}/`,
      metrics: service.metricsUrl,
      ...(embedded ? { brokerSocket: embedded.socketPath } : {}),
      ...(objectStore ? { store: objectStore.describe() } : {}),
    },
    `orchestrator ready; HTTP API on ${service.url}/v1, dashboard on ${service.url}/`,
  );
}
