/**
 * One chaos run, start to end:
 *
 * 1. on RabbitMQ: a node of its own (never the shared one), a TCP fault proxy in front of
 *    it for the orchestrator and one for each worker. On the embedded broker: the
 *    orchestrator runs it (`--broker-socket`), and each worker reaches it through a fault
 *    proxy on a Unix socket of its own;
 * 2. `planrun orchestrator` and N `planrun worker`s as separate processes, each kept
 *    running by a supervisor, each recording its part of the history;
 * 3. the plan's jobs submitted over the submit queue (and HTTP, when the API is in the
 *    build) while the nemesis injects the plan's faults, and the result messages
 *    recorded from a queue bound to the results exchange;
 * 4. after the last fault is healed: the drain (every acknowledged submission answered),
 *    the workers stopped, the queues and the outbox read, the orchestrator stopped, the
 *    ledger's final state and the stored outputs read into the history;
 * 5. the checker over the merged history.
 *
 * With `--profile ha` (ha.ts): three orchestrators on a private PostgreSQL, each through a
 * fault proxy of its own, all on a RabbitMQ cluster of three with quorum queues, as are the
 * workers; the final ledger is read from PostgreSQL, and the failover figures measured.
 *
 * Whatever happens, every process it started, the RabbitMQ node(s) and PostgreSQL are stopped.
 */
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import type { Broker } from '../../src/broker/broker.js';
import { SocketBroker } from '../../src/broker/embedded-socket-client.js';
import { EmbeddedBrokerStore } from '../../src/broker/embedded-store.js';
import { RabbitMqBroker } from '../../src/broker/rabbitmq.js';
import { instrumentEnv } from '../../src/cli/instrument.js';
import { defaultLedgerConfig, type Job } from '../../src/ledger/ledger.js';
import { openLedger } from '../../src/ledger/open-ledger.js';
import { FaultProxy } from '../../test/testing/fault-proxy.js';
import { Topology } from '../../src/topology.js';
import { Adversary } from './adversary.js';
import { check, type CheckReport } from './checker.js';
import { actorEnv, HistoryWriter, historyDirEnv, jobHistoryDirEnv, readHistory, writeMergedHistory, type RunConfig } from './history.js';
import type { Behaviour } from './job-input.js';
import { Nemesis } from './nemesis.js';
import { ResultObserver } from './observer.js';
import { formatFailover, measureFailover } from './failover.js';
import { haBrokerNodes, haOrchestrators, HaServices } from './ha.js';
import { describeFault, makePlan, orchestratorNames, type FaultKind, type Plan } from './plan.js';
import { freePort, RabbitNode } from './rabbit-node.js';
import { formatReport } from './report.js';
import { Submitter } from './submitter.js';
import { ChaosStore, type ChaosStoreKind } from './store.js';
import { Supervised } from './supervisor.js';

export type ChaosBroker = 'rabbitmq' | 'embedded';

/** The instrument (PLANRUN_INSTRUMENT) every planrun process of a run loads: it records their part of the history. */
const recorderModule = fileURLToPath(new URL('./recorder.js', import.meta.url));

export interface ChaosOptions {
  seed: string;
  broker: ChaosBroker;
  /**
   * `--profile ha`: three orchestrators on a private PostgreSQL (each through a fault proxy
   * of its own), a RabbitMQ cluster of three with quorum queues (see ha.ts).
   */
  ha: boolean;
  /** Where outputs go: each worker's folder (default), or an s3rver of the run's own (`--store s3`). */
  store: ChaosStoreKind;
  /** With `--store s3`: the orchestrator's `--store-cleanup-grace`. */
  storeCleanupGraceMs: number;
  jobs: number;
  durationMs: number;
  workers: number;
  slots: number;
  leaseTtlMs: number;
  /**
   * The orchestrator's abandoned-grant window (null: off): under the lease TTL, so that a
   * grant nobody takes up goes back to queued at the same attempt before it could expire.
   */
  grantWindowMs: number | null;
  heartbeatMs: number;
  sweepMs: number;
  backoffMs: number;
  redispatchMs: number;
  controlTimeoutMs: number;
  abortGraceMs: number;
  /** How often the adversary forges a round of control requests (see adversary.ts). */
  adversaryIntervalMs: number;
  consumerTimeoutMs: number;
  /** How long the drain may wait for the last answers after the last fault healed. */
  drainTimeoutMs: number;
  faultKinds: readonly FaultKind[];
  tenants: readonly string[];
  httpShare: number;
  duplicateShare: number;
  crossTenantKeyShare: number;
  behaviourWeights: Readonly<Record<Behaviour, number>>;
  runMs: readonly [number, number];
  /** The built CLI (`.build/src/cli/main.js`) and the chaos job-types module next to this file. */
  cli: string;
  jobTypesModule: string;
  /** Where everything goes; a fresh temporary folder unless given. */
  runDir?: string;
  /** Keep the run folder even when the run passed. */
  keep: boolean;
  log: (message: string) => void;
}

export interface ChaosOutcome {
  report: CheckReport;
  text: string;
  runDir: string;
  elapsedMs: number;
  kept: boolean;
}

/** What the clients need to be back on the broker after a heal: amqplib's reconnect backoff cap (10 s) plus a connect timeout (5 s). */
const reconnectAllowanceMs = 15_000;
const prefix = 'planrun';

export function planOf(options: ChaosOptions): Plan {
  return makePlan({
    seed: options.seed,
    jobs: options.jobs,
    durationMs: options.durationMs,
    workers: options.workers,
    ...(options.ha ? { orchestrators: haOrchestrators, brokerNodes: haBrokerNodes } : {}),
    leaseTtlMs: options.leaseTtlMs,
    faultKinds: options.faultKinds,
    tenants: options.tenants,
    httpShare: options.httpShare,
    duplicateShare: options.duplicateShare,
    crossTenantKeyShare: options.crossTenantKeyShare,
    behaviourWeights: options.behaviourWeights,
    runMs: options.runMs,
  });
}

/** What a run has started, for `emergencyStop`. */
const active = { processes: new Set<Supervised>(), nodes: new Set<RabbitNode>(), services: new Set<HaServices>() };

/** Kills every process the runs of this process started and stops their RabbitMQ nodes and PostgreSQL (on Ctrl-C). */
export async function emergencyStop(): Promise<void> {
  for (const p of active.processes) p.killForGood();
  await Promise.allSettled([...[...active.nodes].map((n) => n.stop()), ...[...active.services].map((s) => s.stop())]);
}

export async function runChaos(options: ChaosOptions): Promise<ChaosOutcome> {
  const began = Date.now();
  const log = options.log;
  const runDir = resolve(options.runDir ?? mkdtempSync(join(tmpdir(), 'planrun-chaos-')));
  const dirs = {
    history: join(runDir, 'history'),
    logs: join(runDir, 'logs'),
    rabbit: join(runDir, 'rabbitmq'),
    orchestrator: join(runDir, 'orchestrator'),
    outputs: join(runDir, 'outputs'),
    scratch: join(runDir, 'scratch'),
  };
  for (const dir of Object.values(dirs)) mkdirSync(dir, { recursive: true });
  const history = new HistoryWriter(dirs.history, 'runner');
  const plan = planOf(options);
  log(`run folder ${runDir}`);
  log(`seed ${options.seed}: ${plan.faults.length} faults (schedule ${plan.fingerprint.faults}), ${plan.jobs.length} jobs (${plan.fingerprint.jobs})`);
  for (const fault of plan.faults) log(`  ${describeFault(fault)}`);

  let node: RabbitNode | undefined;
  let services: HaServices | undefined;
  let store: ChaosStore | undefined;
  /** The embedded broker's socket (the orchestrator serves it), in the run folder. */
  const brokerSocket = join(runDir, 'broker.sock');
  const embedded = options.broker === 'embedded';
  const proxies = new Map<string, FaultProxy>();
  const processes: Supervised[] = [];
  let runnerBroker: Broker | undefined;
  let nemesis: Nemesis | undefined;
  let submitter: Submitter | undefined;
  let adversary: Adversary | undefined;
  let failure: unknown;
  try {
    const orchestratorNamesOfRun = orchestratorNames(options.ha ? haOrchestrators : 1);
    if (options.ha) {
      services = await HaServices.start({ dir: dirs.rabbit, consumerTimeoutMs: options.consumerTimeoutMs, orchestrators: orchestratorNamesOfRun, log });
      active.services.add(services);
    } else if (!embedded) {
      node = await RabbitNode.start({ dir: dirs.rabbit, consumerTimeoutMs: options.consumerTimeoutMs, log });
      active.nodes.add(node);
    }
    /** The node to list queues on at the end (any node of a cluster lists them all). */
    const queueNode = services?.cluster.nodes[0] ?? node;
    if (options.store === 's3') {
      store = await ChaosStore.start(options.storeCleanupGraceMs);
      log(`object store ${store.config.root} (s3rver), cleanup grace ${options.storeCleanupGraceMs} ms`);
    }
    const http = await detectHttp(options.cli);
    const httpPorts = new Map<string, number>();
    if (http) for (const name of orchestratorNamesOfRun) httpPorts.set(name, await freePort());
    const httpUrls = [...httpPorts.values()].map((port) => `http://127.0.0.1:${port}`);
    const keys = new Map<string, string>();
    if (http) {
      // On PostgreSQL the keys are in the ledger: one key serves every orchestrator.
      const keyLedger = services ? ['--ledger', services.directLedgerUrl] : ['--data-dir', dirs.orchestrator];
      for (const tenant of options.tenants) keys.set(tenant, await createKey(options.cli, tenant, keyLedger));
    }
    log(
      http
        ? `HTTP API on ${httpUrls.join(', ')}, keys for ${options.tenants.join(', ')}`
        : 'this build has no HTTP API (no orchestrator --port): every submission goes over the queue',
    );

    // Fair dispatch's limits (where the build has them): half the slots for the first tenant.
    const limits = (await detectLimits(options.cli)) ? { [options.tenants[0]!]: Math.max(1, Math.floor((options.workers * options.slots) / 2)) } : undefined;
    const config: RunConfig = {
      seed: options.seed,
      broker: options.broker,
      prefix,
      jobs: options.jobs,
      durationMs: options.durationMs,
      workers: options.workers,
      slots: options.slots,
      leaseTtlMs: options.leaseTtlMs,
      grantWindowMs: options.grantWindowMs,
      heartbeatMs: options.heartbeatMs,
      sweepMs: options.sweepMs,
      backoffMs: options.backoffMs,
      backoffMaxMs: defaultLedgerConfig.backoffMaxMs,
      redispatchMs: options.redispatchMs,
      controlTimeoutMs: options.controlTimeoutMs,
      abortGraceMs: options.abortGraceMs,
      consumerTimeoutMs: options.consumerTimeoutMs,
      reconnectAllowanceMs,
      outputDir: dirs.outputs,
      ...(store ? { store: store.config } : {}),
      httpAvailable: http,
      ...(limits ? { tenantLimits: limits } : {}),
      faultFingerprint: plan.fingerprint.faults,
      jobFingerprint: plan.fingerprint.jobs,
    };
    history.record({ kind: 'run_config', config });
    for (const fault of plan.faults) history.record({ kind: 'plan_fault', fault });

    // The orchestrator and the embedded broker are one process: nothing to put between them.
    // The cluster's processes reach its nodes directly (ha.ts).
    for (const name of services ? [] : [...(embedded ? [] : ['orchestrator']), ...workerNames(options.workers)]) {
      proxies.set(
        name,
        node ? await FaultProxy.start({ port: node.port }) : await FaultProxy.start({ path: brokerSocket }, { path: join(runDir, `${name}.sock`) }),
      );
    }
    const brokerArgs = (name: string): string[] => {
      if (services) return ['--amqp', services.amqpArg, '--queue-type', 'quorum'];
      // No password in the URL: amqplib's default is guest's, and a password in argv draws a warning.
      if (node) return ['--amqp', `amqp://127.0.0.1:${proxies.get(name)!.port}`];
      if (name === 'orchestrator') return ['--broker-socket', brokerSocket, '--consumer-timeout', `${options.consumerTimeoutMs}ms`];
      return ['--broker-socket', proxies.get(name)!.path];
    };

    const topology = new Topology(prefix);
    const runnerRetry = { initialMs: 100, maxMs: 1000 };
    const observer = new ResultObserver(() => runnerBroker!, topology, history);
    // The app's side: its own connection, straight to the broker (no proxy). The embedded
    // broker exists only once the orchestrator runs it.
    const connectRunner = async () => {
      runnerBroker = services
        ? await RabbitMqBroker.connect({ url: services.cluster.url, queueType: 'quorum', heartbeatSeconds: 2, retry: runnerRetry })
        : node
          ? await RabbitMqBroker.connect({ url: node.url, heartbeatSeconds: 2, retry: runnerRetry })
          : await SocketBroker.connect({ path: brokerSocket, retry: runnerRetry });
      await runnerBroker.declareQueue(topology.submitQueue);
      await observer.start();
    };
    if (!embedded) await connectRunner();

    // The orchestrator and its workers share a fleet key; the adversary knows it for half its forgeries.
    const fleetKey = randomBytes(24).toString('base64url');
    const env = (actor: string): NodeJS.ProcessEnv => ({
      ...process.env,
      [instrumentEnv]: recorderModule,
      [historyDirEnv]: dirs.history,
      [jobHistoryDirEnv]: dirs.history,
      [actorEnv]: actor,
      PLANRUN_LOG_LEVEL: 'info',
      PLANRUN_FLEET_KEY: fleetKey,
      ...(store && orchestratorNamesOfRun.includes(actor) ? store.env : {}),
    });
    const orchestrators = new Map<string, Supervised>();
    for (const name of orchestratorNamesOfRun) {
      const dataDir = join(runDir, name);
      mkdirSync(dataDir, { recursive: true });
      const httpPort = httpPorts.get(name);
      const orchestrator = new Supervised(
        {
          role: 'orchestrator',
          name,
          cli: options.cli,
          args: [
            'orchestrator',
            ...brokerArgs(name),
            ...(services ? ['--ledger', services.ledgerUrl(name)] : []),
            '--data-dir',
            dataDir,
            '--lease-ttl',
            `${options.leaseTtlMs}ms`,
            '--grant-window',
            options.grantWindowMs === null ? 'off' : `${options.grantWindowMs}ms`,
            '--sweep-interval',
            `${options.sweepMs}ms`,
            '--backoff',
            `${options.backoffMs}ms`,
            '--redispatch-after',
            `${options.redispatchMs}ms`,
            '--prefix',
            prefix,
            ...(httpPort === undefined ? [] : ['--port', String(httpPort)]),
            ...(store ? store.orchestratorArgs() : []),
          ],
          env: env(name),
          readyText: '"msg":"orchestrator ready',
          logFile: join(dirs.logs, `${name}.log`),
        },
        history,
      );
      orchestrators.set(name, orchestrator);
      processes.push(orchestrator);
      active.processes.add(orchestrator);
      orchestrator.start();
    }
    for (const orchestrator of orchestrators.values()) {
      if (!(await orchestrator.waitReady(60_000))) throw new Error(`${orchestrator.name} did not start; see ${orchestrator.spec.logFile}`);
    }
    for (const [tenant, maxRunning] of Object.entries(limits ?? {})) {
      const ledgerArgs = services ? ['--ledger', services.directLedgerUrl] : ['--data-dir', dirs.orchestrator];
      await runCli(options.cli, ['tenants', 'set', tenant, '--max-running', String(maxRunning), ...ledgerArgs]);
      log(`running limit of tenant ${tenant}: ${maxRunning}`);
    }
    if (embedded) await connectRunner();

    const workers = new Map<string, Supervised>();
    for (const name of workerNames(options.workers)) {
      const worker = new Supervised(
        {
          role: 'worker',
          name,
          cli: options.cli,
          args: [
            'worker',
            ...brokerArgs(name),
            '--jobs',
            options.jobTypesModule,
            '--slots',
            String(options.slots),
            '--heartbeat-interval',
            `${options.heartbeatMs}ms`,
            '--control-timeout',
            `${options.controlTimeoutMs}ms`,
            '--abort-grace',
            `${options.abortGraceMs}ms`,
            '--stop-grace',
            '5s',
            '--prefix',
            prefix,
            '--output-dir',
            dirs.outputs,
            '--scratch-dir',
            join(dirs.scratch, name),
          ],
          env: env(name),
          readyText: '"msg":"worker ready"',
          logFile: join(dirs.logs, `${name}.log`),
        },
        history,
      );
      workers.set(name, worker);
      processes.push(worker);
      active.processes.add(worker);
      worker.start();
    }
    for (const worker of workers.values()) {
      if (!(await worker.waitReady(60_000))) throw new Error(`worker ${worker.name} did not start; see ${worker.spec.logFile}`);
    }
    log(`${orchestrators.size === 1 ? 'orchestrator' : `${orchestrators.size} orchestrators`} and ${workers.size} workers ready`);

    const startedAt = Date.now();
    submitter = new Submitter({
      broker: runnerBroker!,
      topology,
      history,
      ...(http ? { http: { urls: httpUrls, keys } } : {}),
      giveUpAt: startedAt + options.durationMs + 60_000,
      concurrencyKeys: limits !== undefined,
    });
    submitter.schedule(plan.jobs, startedAt);
    adversary = new Adversary({
      broker: () => runnerBroker,
      topology,
      history,
      fleetKey,
      ...(http ? { http: { urls: httpUrls, keys } } : {}),
      intervalMs: options.adversaryIntervalMs,
      liveWithinMs: options.leaseTtlMs,
    });
    adversary.start();
    const brokers = services?.brokers ?? new Map(node ? [['broker', node]] : []);
    const ledgerTargets = services ? { ledger: { server: services.postgres, proxies: services.ledgerProxies } } : {};
    nemesis = new Nemesis(plan.faults, { workers, orchestrators, proxies, brokers, ...ledgerTargets }, history, (m) =>
      log(`[+${((Date.now() - startedAt) / 1000).toFixed(1)}s] ${m}`),
    );
    const lastHeal = await nemesis.run(startedAt);
    log(`last fault healed at +${((lastHeal - startedAt) / 1000).toFixed(1)}s; waiting for the submissions`);
    await submitter.done();
    await adversary.stop();
    log(`the adversary sent ${adversary.sent} forged control requests`);
    history.record({
      kind: 'submissions_done',
      planned: plan.jobs.reduce((n, j) => n + j.submissions.length, 0),
      acked: submitter.acked,
      unacked: submitter.unacked,
    });

    // The drain: every acknowledged submission answered by a result message.
    const drainStart = Date.now();
    const missing = () => [...submitter!.ackedKeys].filter((k) => !observer.answeredKeys.has(k));
    let lastReport = 0;
    while (missing().length > 0 && Date.now() - drainStart < options.drainTimeoutMs) {
      if (Date.now() - lastReport > 10_000) {
        lastReport = Date.now();
        log(`draining: ${missing().length} acknowledged submissions not answered yet`);
      }
      await delay(200);
    }
    const left = missing();
    history.record({
      kind: 'drain',
      complete: left.length === 0,
      waitedMs: Date.now() - drainStart,
      missing: left.map((k) => {
        const [tenant, key] = k.split('\u0000');
        return { tenant: tenant!, key: key! };
      }),
    });
    log(left.length === 0 ? `drained in ${((Date.now() - drainStart) / 1000).toFixed(1)} s` : `drain gave up with ${left.length} unanswered`);

    // Let the last redeliveries and stale work messages be consumed, then stop the workers.
    await delay(Math.max(2000, 2 * options.leaseTtlMs));
    await Promise.all([...workers.values()].map((w) => w.shutdown(15_000)));
    if (queueNode) history.record({ kind: 'queues_final', ...(await settledQueues(queueNode, observer.queue)) });
    else await delay(2000); // the orchestrator's last consumption of what the workers left
    await observer.stop();
    // No upload URL is handed out once the workers are gone: give the last ones their life
    // and the cleanup grace, so that nothing of a losing attempt may be left.
    if (store) await delay(store.settleMs(options.leaseTtlMs));
    const cleanedUntil = Date.now();
    await Promise.all([...orchestrators.values()].map((o) => o.shutdown(15_000)));
    await runnerBroker!.close();
    runnerBroker = undefined;
    // Stopped, the embedded broker has put back what its consumers held: its store is what is left.
    if (!queueNode) history.record({ kind: 'queues_final', ...storedQueues(join(dirs.orchestrator, 'broker.db'), observer.queue) });
    await recordLedger(services ? services.directLedgerUrl : 'sqlite', dirs.orchestrator, history, store);
    if (store) history.record({ kind: 'store_final', cleanedUntil, objects: await store.list() });
    history.record({ kind: 'run_end', ok: true });
  } catch (error) {
    failure = error;
    history.record({ kind: 'run_end', ok: false, error: error instanceof Error ? error.message : String(error) });
    log(`the run failed: ${error instanceof Error ? error.stack : String(error)}`);
  } finally {
    nemesis?.stop();
    submitter?.cancel();
    await adversary?.stop();
    for (const p of processes) {
      p.killForGood();
      active.processes.delete(p);
    }
    await runnerBroker?.close().catch(() => undefined);
    for (const proxy of proxies.values()) await proxy.close().catch(() => undefined);
    await store?.stop().catch((error: unknown) => log(`could not stop the object store: ${String(error)}`));
    if (node) {
      await node.stop().catch((error: unknown) => log(`could not stop the RabbitMQ node: ${String(error)}`));
      active.nodes.delete(node);
      rmSync(join(dirs.rabbit, 'mnesia'), { recursive: true, force: true });
    }
    if (services) {
      await services.stop().catch((error: unknown) => log(`could not stop the cluster or PostgreSQL: ${String(error)}`));
      active.services.delete(services);
      services.cluster.nodes.forEach((_, i) => rmSync(join(dirs.rabbit, `node-${i + 1}`, 'mnesia'), { recursive: true, force: true }));
    }
  }

  const events = readHistory(dirs.history);
  writeMergedHistory(join(runDir, 'history.jsonl'), events);
  const report = check(events);
  if (options.ha) report.failover = measureFailover(events);
  if (failure !== undefined) report.ok = false;
  const elapsedMs = Date.now() - began;
  let text = formatReport(report, { elapsedMs });
  if (report.failover) text += `\n${formatFailover(report.failover)}`;
  if (failure !== undefined) text += `\nthe run itself failed: ${failure instanceof Error ? failure.message : JSON.stringify(failure)}`;
  writeFileSync(join(runDir, 'report.json'), JSON.stringify(report, null, 2));
  writeFileSync(join(runDir, 'report.txt'), `${text}\n`);
  const kept = options.keep || !report.ok;
  if (!kept) rmSync(runDir, { recursive: true, force: true });
  return { report, text, runDir, elapsedMs, kept };
}

function workerNames(n: number): string[] {
  return Array.from({ length: n }, (_, i) => `w${i + 1}`);
}

/** Queue depths once they stop moving (or after 20 s): every queue of the run should be empty. */
async function settledQueues(node: RabbitNode, observerQueue: string) {
  const deadline = Date.now() + 20_000;
  let queues: Array<{ name: string; messages: number; unacked: number }> = [];
  try {
    for (;;) {
      queues = (await node.listQueues()).filter((q) => q.name.startsWith(`${prefix}.`) || q.name === observerQueue);
      if (queues.every((q) => q.messages === 0 && q.unacked === 0) || Date.now() > deadline) return { queues };
      await delay(1000);
    }
  } catch (error) {
    return { queues, error: error instanceof Error ? error.message : String(error) };
  }
}

/** What the embedded broker's store holds per queue once it is stopped (nothing is unacked then). */
function storedQueues(path: string, observerQueue: string) {
  try {
    const store = EmbeddedBrokerStore.open(path);
    try {
      const { queues, messages } = store.load();
      return {
        queues: queues
          .filter((name) => name.startsWith(`${prefix}.`) || name === observerQueue)
          .map((name) => ({ name, messages: messages.filter((m) => m.queue === name).length, unacked: 0 })),
      };
    } finally {
      store.close();
    }
  } catch (error) {
    return { queues: [], error: error instanceof Error ? error.message : String(error) };
  }
}

/** The final ledger: every job with its attempts, the unsent outbox, and the stored outputs of finished jobs. */
async function recordLedger(choice: string, dataDir: string, history: HistoryWriter, store: ChaosStore | undefined): Promise<void> {
  const ledger = await openLedger(choice, dataDir, defaultLedgerConfig);
  try {
    const jobs: Job[] = [];
    let cursor: string | undefined;
    do {
      const page = await ledger.listJobs({ limit: 1000, ...(cursor === undefined ? {} : { cursor }) });
      jobs.push(...page.jobs);
      cursor = page.nextCursor ?? undefined;
    } while (cursor !== undefined);
    for (const job of jobs.reverse()) {
      history.record({ kind: 'ledger_job', job, attempts: await ledger.getAttempts(job.id) });
      for (const [name, location] of Object.entries(job.result?.outputs ?? {})) {
        const content = store ? await store.read(location) : readFile(location);
        history.record({ kind: 'stored_output', jobId: job.id, name, path: location, ...(content ? { exists: true, ...content } : { exists: false }) });
      }
    }
    history.record({ kind: 'outbox_final', unsent: (await ledger.outboxStats()).unsent });
  } finally {
    await ledger.close();
  }
}

/** What a folder-store output file holds, or undefined when it is missing. */
function readFile(path: string): { bytes: number; sha256: string } | undefined {
  if (!existsSync(path)) return undefined;
  return { bytes: statSync(path).size, sha256: createHash('sha256').update(readFileSync(path)).digest('hex') };
}

/** Whether this build's orchestrator serves the HTTP API (`--port`) and can make keys. */
async function detectHttp(cli: string): Promise<boolean> {
  const help = await runCli(cli, ['orchestrator', '--help']).catch(() => '');
  if (!help.includes('--port')) return false;
  const keysHelp = await runCli(cli, ['keys', 'create', '--help']).catch(() => '');
  return keysHelp.includes('--tenant');
}

/** Whether this build dispatches within running limits (`planrun tenants set`) and takes concurrency keys. */
async function detectLimits(cli: string): Promise<boolean> {
  const help = await runCli(cli, ['tenants', 'set', '--help']).catch(() => '');
  return help.includes('--max-running');
}

/** `ledgerArgs`: where the key goes (`--data-dir` of the SQLite ledger, or `--ledger postgres://…`). */
async function createKey(cli: string, tenant: string, ledgerArgs: string[]): Promise<string> {
  const out = await runCli(cli, ['keys', 'create', '--tenant', tenant, ...ledgerArgs]);
  const key = out.trim().split('\n').pop()?.trim();
  if (!key) throw new Error(`planrun keys create --tenant ${tenant} printed no key`);
  return key;
}

function runCli(cli: string, args: string[]): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    execFile(process.execPath, [cli, ...args], { timeout: 30_000 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`planrun ${args.join(' ')}: ${error.message}\n${stderr}`));
      else resolvePromise(stdout);
    });
  });
}
