/**
 * The nemesis: follows the plan's fault schedule, one fault at a time, each injected at
 * its planned time (or later, if the one before took longer to heal) and healed after its
 * planned duration. What each kind does:
 *
 * - worker-kill: SIGKILL of the worker process (its job processes exit with it); its
 *   supervisor starts a fresh one after the planned downtime.
 * - worker-pause: SIGSTOP of the worker process alone (its job processes keep running) for
 *   longer than the lease TTL, then SIGCONT.
 * - worker-partition: the worker's TCP proxy to the broker black-holes everything, both
 *   ways, without closing anything; healed, it delivers what it held.
 * - worker-latency: the worker's proxy delays every chunk, each way.
 * - broker-restart: `rabbitmqctl stop_app`, then `start_app`.
 * - broker-kill: SIGKILL of the chaos node's beam process, then a fresh start.
 * - orchestrator-kill: SIGKILL of the orchestrator; restarted on the same data dir.
 * - orchestrator-partition: the orchestrator's proxy to the broker black-holes.
 * - ledger-restart (`--profile ha`): `pg_ctl restart -m fast` of the private PostgreSQL.
 * - ledger-cut (`--profile ha`): the orchestrator's proxy to PostgreSQL black-holes.
 *
 * With several orchestrators (o1...) or a cluster's nodes (rabbit-1...), the plan names
 * which one each fault hits.
 *
 * On the embedded broker the orchestrator runs the broker, so orchestrator-kill kills the
 * broker too, and the broker and orchestrator-partition kinds do not apply.
 *
 * A fault counts as healed when the process is ready again, the proxy passes bytes again
 * or the broker has finished starting.
 */
import { setTimeout as delay } from 'node:timers/promises';
import type { FaultProxy } from '../../test/testing/fault-proxy.js';
import type { PrivatePostgres } from '../../test/testing/private-postgres.js';
import type { HistoryWriter } from './history.js';
import type { PlannedFault } from './plan.js';
import type { RabbitNode } from './rabbit-node.js';
import type { Supervised } from './supervisor.js';

export interface NemesisTargets {
  workers: ReadonlyMap<string, Supervised>;
  /** By name: orchestrator, or o1... */
  orchestrators: ReadonlyMap<string, Supervised>;
  /** By target name: w1..., orchestrator. */
  proxies: ReadonlyMap<string, FaultProxy>;
  /** The run's RabbitMQ nodes by name: broker, or rabbit-1... (none on the embedded broker). */
  brokers: ReadonlyMap<string, RabbitNode>;
  /** `--profile ha`: the private PostgreSQL, and each orchestrator's proxy to it by its name. */
  ledger?: { server: PrivatePostgres; proxies: ReadonlyMap<string, FaultProxy> };
}

export interface InjectedFault {
  fault: PlannedFault;
  startedAt: number;
  healedAt: number;
  ok: boolean;
  detail?: string;
}

const readyTimeoutMs = 60_000;
const minGapMs = 1000;

export class Nemesis {
  readonly injected: InjectedFault[] = [];
  private stopped = false;

  constructor(
    private readonly faults: readonly PlannedFault[],
    private readonly targets: NemesisTargets,
    private readonly history: HistoryWriter,
    private readonly log: (message: string) => void,
  ) {}

  stop(): void {
    this.stopped = true;
  }

  /** Runs the schedule; resolves with the time the last fault was healed. */
  async run(startedAt: number): Promise<number> {
    let lastHeal = startedAt;
    for (const fault of this.faults) {
      if (this.stopped) break;
      const due = Math.max(startedAt + fault.atMs, lastHeal + minGapMs);
      if (due > Date.now()) await delay(due - Date.now());
      if (this.stopped) break;
      const injected = await this.inject(fault);
      this.injected.push(injected);
      lastHeal = injected.healedAt;
    }
    return lastHeal;
  }

  private async inject(fault: PlannedFault): Promise<InjectedFault> {
    const { kind, target } = fault;
    const base = { fault: fault.id, fault_kind: kind, target };
    let startedAt = Date.now();
    const start = (detail?: string) => {
      startedAt = Date.now();
      this.history.record({ kind: 'fault_start', ...base, ...(detail === undefined ? {} : { detail }) });
      this.log(`fault #${fault.id} ${kind} ${target}${detail ? ` (${detail})` : ''}`);
    };
    const end = (ok: boolean, detail?: string): InjectedFault => {
      const healedAt = Date.now();
      this.history.record({ kind: 'fault_end', ...base, ok, ...(detail === undefined ? {} : { detail }) });
      this.log(`fault #${fault.id} ${kind} ${target} healed after ${((healedAt - startedAt) / 1000).toFixed(1)}s${ok ? '' : ` (NOT OK: ${detail})`}`);
      return { fault, startedAt, healedAt, ok, ...(detail === undefined ? {} : { detail }) };
    };
    try {
      switch (kind) {
        case 'worker-kill':
        case 'orchestrator-kill': {
          const process = this.processOf(target);
          if (!(await process.waitReady(readyTimeoutMs))) {
            start('target not ready');
            return end(false, 'target never became ready');
          }
          const pid = process.pid;
          process.kill(fault.durationMs);
          start(`SIGKILL pid ${pid}`);
          await delay(fault.durationMs);
          const back = await process.waitReady(readyTimeoutMs);
          return end(back, back ? `restarted as pid ${process.pid}` : 'not ready again');
        }
        case 'worker-pause': {
          const process = this.processOf(target);
          if (!(await process.waitReady(readyTimeoutMs))) {
            start('target not ready');
            return end(false, 'target never became ready');
          }
          process.signal('SIGSTOP');
          start(`SIGSTOP pid ${process.pid}`);
          await delay(fault.durationMs);
          const resumed = process.signal('SIGCONT');
          return end(resumed, resumed ? 'SIGCONT' : 'the process was gone at SIGCONT');
        }
        case 'worker-partition':
        case 'orchestrator-partition': {
          const proxy = this.proxyOf(target);
          proxy.blackhole();
          start(`${proxy.connectionCount} connections held`);
          await delay(fault.durationMs);
          proxy.heal();
          return end(true);
        }
        case 'worker-latency': {
          const proxy = this.proxyOf(target);
          proxy.latency(fault.latencyMs ?? 200);
          start(`${fault.latencyMs} ms each way`);
          await delay(fault.durationMs);
          proxy.heal();
          return end(true);
        }
        case 'broker-restart': {
          const broker = this.rabbitNode(target);
          start('stop_app');
          await broker.stopApp();
          await delay(fault.durationMs);
          await broker.startApp();
          return end(true, 'start_app');
        }
        case 'broker-kill': {
          const broker = this.rabbitNode(target);
          const pid = broker.pid();
          start(`SIGKILL beam pid ${pid}`);
          await broker.killHard();
          await delay(fault.durationMs);
          await broker.restart();
          return end(true, `restarted as pid ${broker.pid()}`);
        }
        case 'ledger-restart': {
          const server = this.ledger().server;
          start(`pg_ctl restart, postmaster pid ${server.pid()}`);
          await server.restart();
          return end(true, `restarted as pid ${server.pid()}`);
        }
        case 'ledger-cut': {
          const proxy = this.ledger().proxies.get(target);
          if (!proxy) throw new Error(`no ledger proxy for ${target}`);
          proxy.blackhole();
          start(`${proxy.connectionCount} connections to PostgreSQL held`);
          await delay(fault.durationMs);
          proxy.heal();
          return end(true);
        }
      }
    } catch (error) {
      return end(false, error instanceof Error ? error.message : String(error));
    }
  }

  private processOf(target: string): Supervised {
    const process = this.targets.orchestrators.get(target) ?? this.targets.workers.get(target);
    if (!process) throw new Error(`no process ${target}`);
    return process;
  }

  private rabbitNode(target: string): RabbitNode {
    const node = this.targets.brokers.get(target);
    if (!node) throw new Error(`no RabbitMQ node ${target} in this run: broker faults need --broker rabbitmq`);
    return node;
  }

  private ledger(): NonNullable<NemesisTargets['ledger']> {
    if (!this.targets.ledger) throw new Error('no private PostgreSQL in this run: ledger faults need --profile ha');
    return this.targets.ledger;
  }

  private proxyOf(target: string): FaultProxy {
    const proxy = this.targets.proxies.get(target);
    if (!proxy) throw new Error(`no proxy for ${target}`);
    return proxy;
  }
}
