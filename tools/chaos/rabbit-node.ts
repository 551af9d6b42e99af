/**
 * A RabbitMQ node of the chaos run's own: its own node name, ports, data and logs in a
 * temporary folder, so that restarting it, stopping its app or killing it with SIGKILL
 * never touches the shared broker on 5672 that other tests use. The chaos run starts it
 * and stops it (also when the run fails), so CI needs nothing but RabbitMQ's binaries.
 *
 * The node's consumer timeout is short (checked every second), so a job that runs past
 * it would be cut off at the broker if planrun did not ack early (G4).
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { randomBytes } from 'node:crypto';
import { isAlive } from '../../test/testing/processes.js';

export interface RabbitNodeOptions {
  /** A folder of its own: data, logs, config and the Erlang cookie go here. */
  dir: string;
  consumerTimeoutMs: number;
  log?: (message: string) => void;
  /**
   * The Erlang cookie (default: a fresh random one): nodes of one cluster share it, and
   * rabbitmqctl reads it from the node's HOME.
   */
  cookie?: string;
}

export interface QueueDepth {
  name: string;
  messages: number;
  unacked: number;
}

/** Where RabbitMQ's scripts are: the package's own folder (runs as the current user), else PATH. */
function binary(name: string): string {
  const override = process.env.PLANRUN_CHAOS_RABBITMQ_BIN;
  if (override) return join(override, name);
  const packaged = join('/usr/lib/rabbitmq/bin', name);
  return existsSync(packaged) ? packaged : name;
}

export class RabbitNode {
  readonly nodeName: string;
  private readonly env: NodeJS.ProcessEnv;
  private readonly pidFile: string;

  private constructor(
    private readonly options: RabbitNodeOptions,
    readonly port: number,
    readonly distPort: number,
  ) {
    this.nodeName = `planrun-chaos-${randomBytes(3).toString('hex')}@localhost`;
    const dir = options.dir;
    for (const sub of ['mnesia', 'log', 'home']) mkdirSync(join(dir, sub), { recursive: true });
    // Erlang refuses a cookie file others may read.
    writeFileSync(join(dir, 'home', '.erlang.cookie'), options.cookie ?? randomBytes(16).toString('hex'), { mode: 0o400 });
    writeFileSync(join(dir, 'enabled_plugins'), '');
    writeFileSync(join(dir, 'rabbitmq.conf'), `listeners.tcp.1 = 127.0.0.1:${port}\n`);
    writeFileSync(join(dir, 'advanced.config'), `[{rabbit, [{consumer_timeout, ${options.consumerTimeoutMs}}, {channel_tick_interval, 1000}]}].\n`);
    // Our own env file, so the system's (which names the shared node) is not read.
    writeFileSync(join(dir, 'rabbitmq-env.conf'), 'ERL_EPMD_ADDRESS=127.0.0.1\n');
    this.pidFile = join(dir, 'beam.pid');
    this.env = {
      ...process.env,
      HOME: join(dir, 'home'),
      RABBITMQ_NODENAME: this.nodeName,
      RABBITMQ_NODE_PORT: String(port),
      RABBITMQ_DIST_PORT: String(distPort),
      RABBITMQ_MNESIA_BASE: join(dir, 'mnesia'),
      RABBITMQ_LOG_BASE: join(dir, 'log'),
      RABBITMQ_ENABLED_PLUGINS_FILE: join(dir, 'enabled_plugins'),
      RABBITMQ_CONFIG_FILE: join(dir, 'rabbitmq.conf'),
      RABBITMQ_ADVANCED_CONFIG_FILE: join(dir, 'advanced.config'),
      RABBITMQ_CONF_ENV_FILE: join(dir, 'rabbitmq-env.conf'),
      RABBITMQ_PID_FILE: this.pidFile,
      // One scheduler: the machine is shared.
      RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS: '+S 1:1',
    };
  }

  /** Starts a fresh node on free ports and waits until it is up. */
  static async start(options: RabbitNodeOptions): Promise<RabbitNode> {
    const port = await freePort();
    let distPort = await freePort();
    while (distPort === port) distPort = await freePort();
    const node = new RabbitNode(options, port, distPort);
    await node.boot();
    return node;
  }

  get url(): string {
    return `amqp://guest:guest@127.0.0.1:${this.port}`;
  }

  /** The node's beam process, if it is running. */
  pid(): number | undefined {
    try {
      const pid = Number(readFileSync(this.pidFile, 'utf8').trim());
      return Number.isInteger(pid) && pid > 0 ? pid : undefined;
    } catch {
      return undefined;
    }
  }

  /** `rabbitmqctl stop_app`: the broker closes every connection; the node stays up. */
  async stopApp(): Promise<void> {
    await this.ctl(['stop_app'], 60_000);
  }

  async startApp(): Promise<void> {
    await this.ctl(['start_app'], 120_000);
    await this.ctl(['await_startup', '--timeout', '120'], 130_000);
  }

  /** SIGKILL of this node's beam process, and only this one's. */
  async killHard(): Promise<void> {
    const pid = this.pid();
    if (pid === undefined) throw new Error(`no pid file for ${this.nodeName}`);
    if (!this.isOurs(pid)) throw new Error(`pid ${pid} from ${this.pidFile} is not the beam of ${this.nodeName}; not killing it`);
    process.kill(pid, 'SIGKILL');
    for (let i = 0; i < 100 && (await isAlive(pid)); i++) await delay(50);
  }

  /** Starts the node again after `killHard` (same name, ports and data). */
  async restart(): Promise<void> {
    await this.boot();
  }

  /** Every queue with its ready and unacknowledged messages. */
  async listQueues(): Promise<QueueDepth[]> {
    const out = await this.ctl(['list_queues', '-q', '--formatter', 'json', 'name', 'messages_ready', 'messages_unacknowledged'], 30_000);
    const rows = JSON.parse(out) as Array<{ name: string; messages_ready: number; messages_unacknowledged: number }>;
    return rows.map((row) => ({ name: row.name, messages: row.messages_ready, unacked: row.messages_unacknowledged }));
  }

  /** Stops the node for good: politely, then with SIGKILL if it lingers. */
  async stop(): Promise<void> {
    const pid = this.pid();
    await this.ctl(['stop'], 30_000).catch(() => undefined);
    if (pid !== undefined && (await isAlive(pid)) && this.isOurs(pid)) process.kill(pid, 'SIGKILL');
  }

  /** Whether `pid` is this node's beam: it was started with this node's name in its environment. */
  private isOurs(pid: number): boolean {
    try {
      const environ = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
      return environ.includes(`RABBITMQ_NODENAME=${this.nodeName}`) && readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('beam');
    } catch {
      return false;
    }
  }

  private async boot(): Promise<void> {
    await run(binary('rabbitmq-server'), ['-detached'], this.env, 30_000);
    // -detached returns at once; the node registers a moment later.
    const deadline = Date.now() + 120_000;
    for (;;) {
      try {
        await this.ctl(['await_startup', '--timeout', '60'], 70_000);
        break;
      } catch (error) {
        if (Date.now() > deadline) throw new Error(`RabbitMQ node ${this.nodeName} did not start: ${(error as Error).message}`);
        await delay(300);
      }
    }
    this.options.log?.(`RabbitMQ node ${this.nodeName} up on 127.0.0.1:${this.port} (pid ${this.pid()})`);
  }

  /** `rabbitmqctl -n <this node> ARGS`. */
  ctl(args: string[], timeoutMs: number): Promise<string> {
    return run(binary('rabbitmqctl'), ['-n', this.nodeName, ...args], this.env, timeoutMs);
  }
}

function run(file: string, args: string[], env: NodeJS.ProcessEnv, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { env, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${file} ${args.join(' ')} failed: ${error.message}\n${stderr}`.trim()));
      else resolve(stdout);
    });
  });
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
