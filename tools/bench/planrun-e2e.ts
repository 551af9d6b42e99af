/**
 * Sections (3), (4) and (5): planrun end to end through the library API. The orchestrator
 * (SQLite ledger, synchronous=FULL, in a temp dir; or, in (5), a PostgreSQL ledger in a
 * schema of its own, with the other orchestrators on it in processes of their own) runs in this process, next to the
 * driver that submits with `submitMany` and listens on the results exchange, as an app
 * would. Workers are separate processes (as under `planrun up`), each with its pool of
 * child job processes. A job counts when its result message has been received:
 * submitted, relayed, leased, run in a child process, fenced, settled, result published.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { Broker, Delivery } from '../../src/broker/broker.js';
import { RabbitMqBroker } from '../../src/broker/rabbitmq.js';
import { silentLogger } from '../../src/core/logger.js';
import { EmbeddedBrokerService } from '../../src/deploy/embedded-broker-service.js';
import type { ResultMessage, SubmitParams } from '../../src/ledger/ledger.js';
import pg from 'pg';
import type { Ledger } from '../../src/ledger/ledger.js';
import { openPostgresLedger } from '../../src/ledger/postgres/postgres-ledger.js';
import { openSqliteLedger, sqliteLedgerStats } from '../../src/ledger/sqlite/sqlite-ledger.js';
import { Orchestrator } from '../../src/orchestrator/orchestrator.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { Topology } from '../../src/topology.js';
import type { BenchEnvironment, BenchProfile } from './options.js';
import { cpuMs, findListeningPid, hrNow, procCpuMs, load1, procStatusMiB, RssSampler, sleep, summarise, until } from './measure.js';
import { noopJobType } from './noop-jobs.js';
import { Peers } from './peers.js';
import type { ThroughputResult } from './results.js';

/** The ledger of a run: SQLite in the temp dir, or PostgreSQL shared by `orchestrators` orchestrators (each its own process). */
export type BenchLedger = { kind: 'sqlite' } | { kind: 'postgres'; orchestrators: number };

const leaseTtlMs = 90_000;

export async function runPlanrun(
  profile: BenchProfile,
  env: BenchEnvironment,
  brokerKind: 'embedded' | 'rabbitmq',
  cpuProfileDir?: string,
  ledgerKind: BenchLedger = { kind: 'sqlite' },
): Promise<ThroughputResult> {
  const loadAtStart = load1();
  const dir = tempDir('planrun-bench-');
  const topology = new Topology(`bench${randomBytes(4).toString('hex')}`);
  const closers: Array<() => Promise<unknown>> = [];
  const rabbitPid = brokerKind === 'rabbitmq' ? findListeningPid(Number(new URL(env.amqpUrl).port || 5672)) : undefined;
  const sampler = new RssSampler(() => (rabbitPid ? [rabbitPid] : []));
  try {
    // The brokers: the orchestrator's connection, the app's (results), the workers' address.
    let orchestratorBroker: Broker;
    let appBroker: Broker;
    let workerBroker: { amqpUrl?: string; socketPath?: string };
    let routedMessages: (() => number) | undefined;
    if (brokerKind === 'embedded') {
      // As `planrun up` runs it: stored in the data dir, served on a Unix socket.
      const embedded = await EmbeddedBrokerService.start(dir.path);
      closers.push(() => embedded.stop());
      orchestratorBroker = embedded.broker.connect();
      appBroker = embedded.broker.connect();
      workerBroker = { socketPath: embedded.socketPath };
      routedMessages = () => embedded.broker.routedMessages;
    } else {
      orchestratorBroker = await RabbitMqBroker.connect({ url: env.amqpUrl });
      appBroker = await RabbitMqBroker.connect({ url: env.amqpUrl });
      closers.push(() => orchestratorBroker.close());
      workerBroker = { amqpUrl: env.amqpUrl };
    }
    const schema = `bench_${randomBytes(6).toString('hex')}`;
    let ledger: Ledger;
    const config = { dispatch: env.dispatch };
    if (ledgerKind.kind === 'sqlite') ledger = await openSqliteLedger({ path: join(dir.path, 'ledger.db'), config });
    else {
      ledger = await openPostgresLedger({ connectionString: env.postgresUrl, schema, config });
      closers.push(() => dropSchema(env.postgresUrl, schema));
    }
    closers.push(() => ledger.close());
    const orchestrator = new Orchestrator({ ledger, broker: orchestratorBroker, topology, logger: silentLogger(), leaseTtlMs });
    await orchestrator.start();
    closers.push(() => orchestrator.stop());
    // The other orchestrators on the same ledger and broker, each a process of its own, as in production.
    const otherOrchestrators = new Peers(cpuProfileDir);
    closers.push(() => otherOrchestrators.stop());
    if (ledgerKind.kind === 'postgres' && ledgerKind.orchestrators > 1) {
      await otherOrchestrators.start(ledgerKind.orchestrators - 1, () => ({
        mode: 'planrun-orchestrator',
        amqpUrl: env.amqpUrl,
        postgresUrl: env.postgresUrl,
        schema,
        prefix: topology.prefix,
        leaseTtlMs,
      }));
    }

    // The app's view: every result message, when it arrived, and when its job started.
    const resultsQueue = `${topology.prefix}.bench-results`;
    await appBroker.declareQueue(resultsQueue);
    await appBroker.bindQueue(resultsQueue, topology.resultsExchange, '#');
    let received = 0;
    let lastAt = 0;
    let failedJobs = 0;
    const startedAt = new Map<string, number>();
    const watched = new Set<string>();
    const subscription = await appBroker.consume(
      resultsQueue,
      (delivery: Delivery) => {
        received++;
        lastAt = hrNow();
        if (watched.size > 0) {
          const body = JSON.parse(delivery.body.toString('utf8')) as ResultMessage;
          if (watched.has(body.id)) startedAt.set(body.id, (body.result?.data as { startedAt: number }).startedAt);
        }
        if (delivery.routingKey.endsWith('.failed')) failedJobs++;
        delivery.ack();
      },
      { prefetch: 1000 },
    );
    closers.push(async () => {
      await subscription.cancel();
      for (const queue of [resultsQueue, topology.controlQueue, topology.submitQueue, topology.deadQueue, topology.workQueue(noopJobType)]) {
        await appBroker.deleteQueue(queue).catch(() => undefined);
      }
      for (const exchange of topology.exchanges) await appBroker.deleteExchange(exchange).catch(() => undefined);
      await appBroker.close();
    });

    const peers = new Peers(cpuProfileDir);
    closers.push(() => peers.stop());
    await peers.start(profile.workers, (i) => ({
      mode: 'planrun-worker',
      ...workerBroker,
      prefix: topology.prefix,
      slots: profile.slots,
      scratchDir: join(dir.path, `scratch-${i}`),
      outputDir: join(dir.path, 'outputs'),
      ...(cpuProfileDir ? { jobCpuProfileDir: cpuProfileDir } : {}),
    }));

    const job: SubmitParams = { tenant: 'bench', type: noopJobType, input: {} };
    const submitMany = async (count: number) => {
      for (let sent = 0; sent < count; sent += profile.submitChunk) {
        await orchestrator.submitMany(Array.from({ length: Math.min(profile.submitChunk, count - sent) }, () => job));
      }
    };
    await submitMany(profile.warmupJobs);
    await until('the warm-up jobs', () => received >= profile.warmupJobs, profile.sectionTimeoutMs);

    const latencies: number[] = [];
    for (let i = 0; i < profile.latencySamples; i++) {
      const t0 = hrNow();
      const { job: submitted } = await orchestrator.submit(job);
      watched.add(submitted.id);
      await until('a latency job', () => startedAt.has(submitted.id), 30_000, 1);
      latencies.push(startedAt.get(submitted.id)! - t0);
      watched.delete(submitted.id);
      await sleep(5);
    }

    const before = received;
    const cpuBefore = cpuMs() + otherOrchestrators.cpuMs();
    const workerCpuBefore = peers.cpuSplitMs();
    const serverCpuBefore = rabbitPid ? procCpuMs(rabbitPid) : 0;
    const txBefore = sqliteLedgerStats(ledger)?.transactions;
    const routedBefore = routedMessages?.();
    const t0 = hrNow();
    await submitMany(profile.jobs);
    await until('every result', () => received >= before + profile.jobs, profile.sectionTimeoutMs);
    const seconds = (lastAt - t0) / 1000;
    const orchestratorCpuMsPerJob = (cpuMs() + otherOrchestrators.cpuMs() - cpuBefore) / profile.jobs;
    const { workerCpuMsPerJob, jobProcessCpuMsPerJob } = peers.cpuPerJobSince(workerCpuBefore, profile.jobs);
    const serverCpuMsPerJob = rabbitPid ? (procCpuMs(rabbitPid) - serverCpuBefore) / profile.jobs : undefined;
    const txAfter = sqliteLedgerStats(ledger)?.transactions;
    const transactionsPerJob = txAfter === undefined || txBefore === undefined ? undefined : (txAfter - txBefore) / profile.jobs;
    const brokerMessagesPerJob = routedMessages && routedBefore !== undefined ? (routedMessages() - routedBefore) / profile.jobs : undefined;
    const rss = peers.peakRss();
    const serverRss = sampler.stop();
    const notes = [`${profile.workers} worker processes x ${profile.slots} slots (one child job process per slot); orchestrator and submitter in one process`];
    if (ledgerKind.kind === 'postgres') {
      const others = ledgerKind.orchestrators - 1;
      notes.push(
        others === 0
          ? 'PostgreSQL ledger (synchronous_commit on, a schema of its own on the local server), 1 orchestrator'
          : `PostgreSQL ledger (synchronous_commit on), ${ledgerKind.orchestrators} orchestrators: the submitter's, and ${others} in processes of their own; orchestrator CPU is theirs together`,
      );
    }
    if (failedJobs > 0) notes.push(`${failedJobs} jobs FAILED`);
    return {
      count: profile.jobs,
      seconds,
      perSecond: profile.jobs / seconds,
      latency: summarise(latencies),
      orchestratorRssMiB: procStatusMiB('self', 'VmHWM'),
      serverRssMiB: rabbitPid ? serverRss.get(rabbitPid) : undefined,
      server: brokerKind === 'rabbitmq' ? 'RabbitMQ' : 'embedded (in the orchestrator)',
      workerRssMiB: rss.processMiB,
      jobProcessRssMiB: rss.childMiB,
      orchestratorCpuMsPerJob,
      workerCpuMsPerJob,
      jobProcessCpuMsPerJob,
      serverCpuMsPerJob,
      ...(transactionsPerJob === undefined ? {} : { transactionsPerJob }),
      ...(brokerMessagesPerJob === undefined ? {} : { brokerMessagesPerJob }),
      load: [loadAtStart, load1()],
      notes,
    };
  } finally {
    sampler.stop();
    for (const close of closers.reverse()) await close().catch(() => undefined);
    dir.remove();
  }
}

async function dropSchema(url: string, schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  } finally {
    await client.end();
  }
}
