/**
 * Entry of the benchmark's worker-side processes: a raw amqplib consumer, a consumer of
 * the embedded broker over its socket, a BullMQ worker (its processor in process or
 * sandboxed), a planrun worker (with its child-process pool), or one more planrun
 * orchestrator on the driver's PostgreSQL ledger. Forked by the driver
 * with its config as argv[2]; reports over IPC (peer-protocol.ts) and stops on `stop`.
 */
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { hrNow } from './measure.js';
import { noopJobsModule } from './noop-jobs.js';
import {
  latencyMark,
  type AmqpConsumerConfig,
  type BullmqWorkerConfig,
  type EmbeddedConsumerConfig,
  type PeerCommand,
  type PeerConfig,
  type PeerMessage,
  type PlanrunOrchestratorConfig,
  type PlanrunWorkerConfig,
} from './peer-protocol.js';

const sandboxedProcessor = fileURLToPath(new URL('./bullmq-processor.js', import.meta.url));

function tell(message: PeerMessage): void {
  process.send?.(message);
}

/** Counts what was done; tells the driver at most every 50 ms, and not when nothing changed. */
class Progress {
  private done = 0;
  private lastAt = 0;
  private reported = 0;
  private readonly timer = setInterval(() => this.report(), 50);

  one(at = hrNow()): void {
    this.done++;
    this.lastAt = at;
  }

  report(): void {
    if (this.done === this.reported) return;
    this.reported = this.done;
    tell({ kind: 'progress', done: this.done, lastAt: this.lastAt });
  }

  stop(): void {
    clearInterval(this.timer);
    this.report();
  }
}

async function amqpConsumer(config: AmqpConsumerConfig): Promise<() => Promise<void>> {
  const amqp = (await import('amqplib')).default;
  const connection = await amqp.connect(config.url);
  const channel = await connection.createChannel();
  await channel.prefetch(config.prefetch);
  const progress = new Progress();
  await channel.consume(config.queue, (message) => {
    if (!message) return;
    const at = hrNow();
    if (message.properties.headers?.[latencyMark]) tell({ kind: 'started', id: String(message.properties.messageId), at });
    channel.ack(message);
    progress.one(at);
  });
  return async () => {
    progress.stop();
    await connection.close();
  };
}

async function embeddedConsumer(config: EmbeddedConsumerConfig): Promise<() => Promise<void>> {
  const { SocketBroker } = await import('../../src/broker/embedded-socket-client.js');
  const broker = await SocketBroker.connect({ path: config.socketPath });
  const progress = new Progress();
  await broker.consume(
    config.queue,
    (delivery) => {
      const at = hrNow();
      if (delivery.headers[latencyMark]) tell({ kind: 'started', id: String(delivery.messageId), at });
      delivery.ack();
      progress.one(at);
    },
    { prefetch: config.prefetch },
  );
  return async () => {
    progress.stop();
    await broker.close();
  };
}

async function bullmqWorker(config: BullmqWorkerConfig): Promise<() => Promise<void>> {
  const { Worker } = await import('bullmq');
  const progress = new Progress();
  const options = { connection: { host: config.host, port: config.port, maxRetriesPerRequest: null }, concurrency: config.concurrency, prefix: config.prefix };
  const worker = config.sandboxed
    ? new Worker(config.queue, sandboxedProcessor, { ...options, useWorkerThreads: false })
    : new Worker(config.queue, async () => ({ startedAt: hrNow() }), options);
  worker.on('completed', (job, result: { startedAt: number }) => {
    if ((job.data as Record<string, unknown>)[latencyMark]) tell({ kind: 'started', id: String(job.id), at: result.startedAt });
    progress.one();
  });
  worker.on('error', (error) => tell({ kind: 'failed', message: String(error) }));
  await worker.waitUntilReady();
  return async () => {
    progress.stop();
    await worker.close();
  };
}

async function planrunWorker(config: PlanrunWorkerConfig): Promise<() => Promise<void>> {
  const [{ RabbitMqBroker }, { SocketBroker }, { silentLogger }, { Topology }, { DirectoryOutputStore }, { loadJobTypes }, { ProcessPool }, { Worker }] =
    await Promise.all([
      import('../../src/broker/rabbitmq.js'),
      import('../../src/broker/embedded-socket-client.js'),
      import('../../src/core/logger.js'),
      import('../../src/topology.js'),
      import('../../src/worker/output-store.js'),
      import('../../src/worker/runner/job-type.js'),
      import('../../src/worker/runner/pool.js'),
      import('../../src/worker/worker.js'),
    ]);
  const broker = config.amqpUrl ? await RabbitMqBroker.connect({ url: config.amqpUrl }) : await SocketBroker.connect({ path: config.socketPath! });
  const jobModules = [noopJobsModule];
  const jobTypes = await loadJobTypes(noopJobsModule);
  const { jobCpuProfileDir } = config;
  const runner = new ProcessPool({
    jobModules,
    size: config.slots,
    ...(jobCpuProfileDir ? { nodeFlags: ['--cpu-prof', `--cpu-prof-dir=${jobCpuProfileDir}`] } : {}),
  });
  await runner.ready();
  mkdirSync(config.scratchDir, { recursive: true });
  const worker = new Worker({
    broker,
    topology: new Topology(config.prefix),
    runner,
    jobTypes,
    slots: config.slots,
    capabilities: [],
    scratchRoot: config.scratchDir,
    outputStore: new DirectoryOutputStore(config.outputDir),
    logger: silentLogger(),
  });
  await worker.start();
  // A job process writes its profile only when it exits on its own, as it does when this
  // process is gone (see child.ts), not when the pool kills it: so, profiling, just exit.
  if (jobCpuProfileDir) return () => Promise.resolve();
  return async () => {
    await worker.stop(5_000);
    await broker.close();
  };
}

async function planrunOrchestrator(config: PlanrunOrchestratorConfig): Promise<() => Promise<void>> {
  const [{ RabbitMqBroker }, { silentLogger }, { Topology }, { openPostgresLedger }, { Orchestrator }] = await Promise.all([
    import('../../src/broker/rabbitmq.js'),
    import('../../src/core/logger.js'),
    import('../../src/topology.js'),
    import('../../src/ledger/postgres/postgres-ledger.js'),
    import('../../src/orchestrator/orchestrator.js'),
  ]);
  const broker = await RabbitMqBroker.connect({ url: config.amqpUrl });
  const ledger = await openPostgresLedger({ connectionString: config.postgresUrl, schema: config.schema });
  const orchestrator = new Orchestrator({ ledger, broker, topology: new Topology(config.prefix), logger: silentLogger(), leaseTtlMs: config.leaseTtlMs });
  await orchestrator.start();
  return async () => {
    await orchestrator.stop();
    await ledger.close();
    await broker.close();
  };
}

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2] ?? '{}') as PeerConfig;
  let stop: () => Promise<void>;
  try {
    if (config.mode === 'amqp-consumer') stop = await amqpConsumer(config);
    else if (config.mode === 'embedded-consumer') stop = await embeddedConsumer(config);
    else if (config.mode === 'bullmq-worker') stop = await bullmqWorker(config);
    else if (config.mode === 'planrun-orchestrator') stop = await planrunOrchestrator(config);
    else stop = await planrunWorker(config);
  } catch (error) {
    tell({ kind: 'failed', message: error instanceof Error ? (error.stack ?? error.message) : String(error) });
    process.exit(1);
  }
  process.on('message', (command: PeerCommand) => {
    if (command.kind !== 'stop') return;
    void stop()
      .catch(() => undefined)
      .finally(() => process.exit(0));
  });
  // The driver is gone: nobody will ever say stop.
  process.on('disconnect', () => process.exit(0));
  tell({ kind: 'ready' });
}

void main();
