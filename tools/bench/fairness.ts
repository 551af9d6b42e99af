/**
 * The fairness row (issue 15): tenant A submits a burst of quick jobs, then tenant B a few;
 * B's submit-to-start latency (p50 / p99) shows whether B waits behind A's whole burst
 * (fifo: the broker's queue holds it all, in submission order) or only for its fair share
 * of the slots (fair: the dispatcher releases about one round per slot and alternates
 * tenants). The whole run's throughput is measured too, to compare the two modes.
 *
 *   node .build/tools/bench/fairness.js [--dispatch fair|fifo] [--a-jobs 5000] [--b-jobs 50]
 *
 * As section (4): RabbitMQ, the SQLite ledger (synchronous=FULL), the orchestrator in this
 * process, 2 worker processes x 16 slots running the no-op job type. Prints one JSON line
 * (a FairnessRun); fairness-runs.ts keeps the last measured ones for docs/benchmarks.md.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { RabbitMqBroker } from '../../src/broker/rabbitmq.js';
import { silentLogger } from '../../src/core/logger.js';
import type { DispatchMode, ResultMessage, SubmitParams } from '../../src/ledger/ledger.js';
import { openSqliteLedger } from '../../src/ledger/sqlite/sqlite-ledger.js';
import { Orchestrator } from '../../src/orchestrator/orchestrator.js';
import { Topology } from '../../src/topology.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { hrNow, load1, summarise, until } from './measure.js';
import { noopJobType } from './noop-jobs.js';
import { defaultEnvironment, fullProfile } from './options.js';
import { Peers } from './peers.js';
import type { FairnessRun } from './results.js';

const { values } = parseArgs({
  options: { dispatch: { type: 'string', default: 'fair' }, 'a-jobs': { type: 'string', default: '5000' }, 'b-jobs': { type: 'string', default: '50' } },
});
if (values.dispatch !== 'fair' && values.dispatch !== 'fifo') throw new Error('--dispatch is fair or fifo');
const dispatch: DispatchMode = values.dispatch;
const aJobs = Number(values['a-jobs']);
const bJobs = Number(values['b-jobs']);
const { workers, slots, submitChunk, warmupJobs } = fullProfile;

const dir = tempDir('planrun-bench-fairness-');
const topology = new Topology(`benchfair${randomBytes(4).toString('hex')}`);
const broker = await RabbitMqBroker.connect({ url: defaultEnvironment.amqpUrl });
const app = await RabbitMqBroker.connect({ url: defaultEnvironment.amqpUrl });
const ledger = await openSqliteLedger({ path: join(dir.path, 'ledger.db'), config: { dispatch } });
const orchestrator = new Orchestrator({ ledger, broker, topology, logger: silentLogger(), leaseTtlMs: 90_000 });
const peers = new Peers();
const loadAtStart = load1();
try {
  await orchestrator.start();
  const resultsQueue = `${topology.prefix}.bench-results`;
  await app.declareQueue(resultsQueue);
  await app.bindQueue(resultsQueue, topology.resultsExchange, '#');
  let received = 0;
  let lastAt = 0;
  const startedAt = new Map<string, number>();
  await app.consume(
    resultsQueue,
    (delivery) => {
      received++;
      lastAt = hrNow();
      const body = JSON.parse(delivery.body.toString('utf8')) as ResultMessage;
      if (body.tenant === 'B') startedAt.set(body.id, (body.result?.data as { startedAt: number }).startedAt);
      delivery.ack();
    },
    { prefetch: 1000 },
  );
  await peers.start(workers, (i) => ({
    mode: 'planrun-worker',
    amqpUrl: defaultEnvironment.amqpUrl,
    prefix: topology.prefix,
    slots,
    scratchDir: join(dir.path, `scratch-${i}`),
    outputDir: join(dir.path, 'outputs'),
  }));
  const submit = async (tenant: string, count: number) => {
    const job: SubmitParams = { tenant, type: noopJobType, input: {} };
    for (let sent = 0; sent < count; sent += submitChunk) await orchestrator.submitMany(Array.from({ length: Math.min(submitChunk, count - sent) }, () => job));
  };
  await submit('A', warmupJobs);
  await until('the warm-up jobs', () => received >= warmupJobs, 600_000);

  const before = received;
  const t0 = hrNow();
  await submit('A', aJobs);
  const bSubmittedAt = hrNow();
  const b = await orchestrator.submitMany(Array.from({ length: bJobs }, () => ({ tenant: 'B', type: noopJobType, input: {} })));
  await until('every result', () => received >= before + aJobs + bJobs, 600_000);
  const latency = summarise(b.map(({ job }) => startedAt.get(job.id)! - bSubmittedAt));
  const seconds = (lastAt - t0) / 1000;
  const run: FairnessRun = {
    dispatch,
    aJobs,
    bJobs,
    slots: workers * slots,
    bSubmitToStartMs: { p50: Math.round(latency.p50Ms), p99: Math.round(latency.p99Ms) },
    jobsPerSecond: Math.round((aJobs + bJobs) / seconds),
    seconds: Math.round(seconds * 100) / 100,
    load: [loadAtStart, load1()],
  };
  // One line, as tools/bench/fairness-runs.ts keeps the last measured runs.
  console.log(JSON.stringify(run));
} finally {
  await peers.stop();
  await orchestrator.stop();
  for (const queue of [topology.controlQueue, topology.submitQueue, topology.deadQueue, topology.workQueue(noopJobType), `${topology.prefix}.bench-results`]) {
    await app.deleteQueue(queue).catch(() => undefined);
  }
  for (const exchange of topology.exchanges) await app.deleteExchange(exchange).catch(() => undefined);
  await app.close();
  await broker.close();
  await ledger.close();
  dir.remove();
}
