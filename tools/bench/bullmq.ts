/**
 * Section (2): the peer. BullMQ on Redis, no-op jobs added in bulk, workers in separate
 * processes with the same total concurrency as planrun's slots. Once on the shared Redis
 * (no persistence), once on a Redis of our own with `appendfsync always`, the closest it
 * comes to planrun's durability (each write fsynced before it is answered), once
 * (2s) with a sandboxed processor: each job in a child process of BullMQ's pool, the
 * isolation planrun gives every job, and once (2sf) with both: the like-for-like peer
 * of planrun's rows (3) and (4) (issue 16).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { freePort } from '../../test/testing/free-port.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import type { BenchEnvironment, BenchProfile } from './options.js';
import { hrNow, load1, procCpuMs, RssSampler, sleep, summarise, until } from './measure.js';
import { latencyMark } from './peer-protocol.js';
import { Peers } from './peers.js';
import type { ThroughputResult } from './results.js';

export async function runBullmq(
  profile: BenchProfile,
  env: BenchEnvironment,
  durability: 'memory' | 'fsync',
  cpuProfileDir?: string,
  processor: 'in-process' | 'sandboxed' = 'in-process',
): Promise<ThroughputResult> {
  const loadAtStart = load1();
  const notes: string[] = [];
  let redis: OwnRedis | undefined;
  let host = env.redisHost;
  let port = env.redisPort;
  if (durability === 'fsync') {
    redis = await OwnRedis.start(['--appendonly', 'yes', '--appendfsync', 'always']);
    port = redis.port;
    notes.push('own redis-server, appendonly yes, appendfsync always');
  } else if (!(await reachable(host, port))) {
    // No shared Redis here (e.g. a laptop): one of our own, as the shared one is, with no persistence.
    redis = await OwnRedis.start(['--appendonly', 'no']);
    host = '127.0.0.1';
    port = redis.port;
    notes.push(`own redis-server (nothing answered on ${env.redisHost}:${env.redisPort}), no persistence`);
  } else notes.push(`shared redis-server ${host}:${port}, no persistence`);

  const info = new Redis({ host, port, lazyConnect: true });
  await info.connect();
  const redisPid = Number(/process_id:(\d+)/.exec(await info.info('server'))?.[1]);
  const sampler = new RssSampler(() => (redisPid ? [redisPid] : []));
  const prefix = `bench${randomBytes(4).toString('hex')}`;
  const queueName = 'noop';
  const queue = new Queue(queueName, { connection: { host, port }, prefix });
  const peers = new Peers(cpuProfileDir);
  try {
    const sandboxed = processor === 'sandboxed';
    await peers.start(profile.workers, () => ({ mode: 'bullmq-worker', host, port, queue: queueName, prefix, concurrency: profile.slots, sandboxed }));
    const addMany = async (count: number) => {
      for (let sent = 0; sent < count; sent += profile.submitChunk) {
        const n = Math.min(profile.submitChunk, count - sent);
        await queue.addBulk(Array.from({ length: n }, () => ({ name: 'noop', data: {} })));
      }
    };
    await addMany(profile.warmupJobs);
    await until('the warm-up jobs', () => peers.done >= profile.warmupJobs, profile.sectionTimeoutMs);
    const latencies: number[] = [];
    for (let i = 0; i < profile.latencySamples; i++) {
      const t0 = hrNow();
      const job = await queue.add('noop', { [latencyMark]: true });
      latencies.push((await peers.waitStarted(String(job.id))) - t0);
      await sleep(5);
    }
    await until('the latency jobs to be counted', () => peers.done >= profile.warmupJobs + profile.latencySamples, 10_000);
    const before = peers.done;
    const workerCpuBefore = peers.cpuSplitMs();
    const serverCpuBefore = redisPid ? procCpuMs(redisPid) : 0;
    const t0 = hrNow();
    await addMany(profile.jobs);
    await until('every job to complete', () => peers.done >= before + profile.jobs, profile.sectionTimeoutMs);
    const seconds = (peers.lastAt - t0) / 1000;
    const { workerCpuMsPerJob, jobProcessCpuMsPerJob } = peers.cpuPerJobSince(workerCpuBefore, profile.jobs);
    const serverCpuMsPerJob = redisPid ? (procCpuMs(redisPid) - serverCpuBefore) / profile.jobs : undefined;
    const rss = peers.peakRss();
    const serverRss = sampler.stop();
    notes.push(
      `${profile.workers} worker processes x concurrency ${profile.slots}, ${sandboxed ? "sandboxed no-op processor (child processes of BullMQ's pool)" : 'in-process no-op processor'}, addBulk of ${profile.submitChunk}`,
    );
    return {
      count: profile.jobs,
      seconds,
      perSecond: profile.jobs / seconds,
      latency: summarise(latencies),
      serverRssMiB: redisPid ? serverRss.get(redisPid) : undefined,
      server: 'Redis',
      workerRssMiB: rss.processMiB,
      ...(sandboxed ? { jobProcessRssMiB: rss.childMiB, jobProcessCpuMsPerJob } : {}),
      workerCpuMsPerJob,
      serverCpuMsPerJob,
      load: [loadAtStart, load1()],
      notes,
    };
  } finally {
    sampler.stop();
    await peers.stop();
    await queue.obliterate({ force: true }).catch(() => undefined);
    await queue.close().catch(() => undefined);
    info.disconnect();
    await redis?.stop();
  }
}

async function reachable(host: string, port: number): Promise<boolean> {
  const client = new Redis({ host, port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 1000 });
  client.on('error', () => undefined); // a refused connection is the answer, not an incident
  try {
    await client.connect();
    return (await client.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    client.disconnect();
  }
}

/** A redis-server the benchmark starts on a free port, in a temp dir, and stops. */
class OwnRedis {
  private constructor(
    readonly port: number,
    private readonly child: ChildProcess,
    private readonly dir: { path: string; remove(): void },
  ) {}

  static async start(args: string[]): Promise<OwnRedis> {
    const port = await freePort();
    const dir = tempDir('planrun-bench-redis-');
    const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--dir', dir.path, ...args], {
      stdio: 'ignore',
    });
    let failure: Error | undefined;
    child.on('error', (error) => (failure = error));
    for (let i = 0; i < 100 && !failure && !(await reachable('127.0.0.1', port)); i++) await sleep(50);
    if (failure || !(await reachable('127.0.0.1', port))) {
      child.kill('SIGKILL');
      dir.remove();
      throw new Error(`redis-server did not start on port ${port}${failure ? `: ${failure.message}` : ''}`);
    }
    return new OwnRedis(port, child, dir);
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null) {
      const exited = once(this.child, 'exit');
      this.child.kill('SIGTERM');
      await exited;
    }
    this.dir.remove();
  }
}
