/** The machine a run was measured on, as docs/benchmarks.md describes it. */
import { readFileSync } from 'node:fs';
import { cpus, release, tmpdir, totalmem } from 'node:os';
import { createRequire } from 'node:module';
import amqp from 'amqplib';
import Database from 'better-sqlite3';
import { Redis } from 'ioredis';
import type { BenchEnvironment } from './options.js';

export interface MachineDescription {
  cpu: string;
  cores: number;
  memoryGiB: number;
  os: string;
  node: string;
  rabbitmq: string;
  redis: string;
  sqlite: string;
  bullmq: string;
  /** The file system of the temp dir, where the ledger and the fsync'd Redis write. */
  tempFs: string;
}

export async function describeMachine(env: BenchEnvironment): Promise<MachineDescription> {
  const require = createRequire(import.meta.url);
  const db = new Database(':memory:');
  const sqlite = (db.prepare('SELECT sqlite_version() AS v').get() as { v: string }).v;
  db.close();
  return {
    cpu: cpus()[0]?.model ?? 'unknown',
    cores: cpus().length,
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    os: `Linux ${release()}`,
    node: process.version,
    rabbitmq: await rabbitVersion(env.amqpUrl),
    redis: await redisVersion(env),
    sqlite,
    bullmq: (require('bullmq/package.json') as { version: string }).version,
    tempFs: fileSystemOf(tmpdir()),
  };
}

async function rabbitVersion(url: string): Promise<string> {
  try {
    const connection = await amqp.connect(url);
    const properties = (connection.connection as unknown as { serverProperties?: Record<string, unknown> }).serverProperties ?? {};
    await connection.close();
    return typeof properties.version === 'string' ? properties.version : 'unknown';
  } catch (error) {
    return `unreachable (${error instanceof Error ? error.message : String(error)})`;
  }
}

async function redisVersion(env: BenchEnvironment): Promise<string> {
  const client = new Redis({ host: env.redisHost, port: env.redisPort, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return /redis_version:(\S+)/.exec(await client.info('server'))?.[1] ?? 'unknown';
  } catch {
    return 'not reachable (the benchmark starts its own redis-server)';
  } finally {
    client.disconnect();
  }
}

/** The type of the file system `path` is on, from the longest matching mount point. */
function fileSystemOf(path: string): string {
  try {
    let best = { mount: '', type: 'unknown', device: '' };
    for (const line of readFileSync('/proc/mounts', 'utf8').split('\n')) {
      const [device, mount, type] = line.split(' ');
      if (!device || !mount || !type) continue;
      if ((path === mount || path.startsWith(mount.endsWith('/') ? mount : `${mount}/`)) && mount.length >= best.mount.length) {
        best = { mount, type, device };
      }
    }
    return `${best.type} (${path} on ${best.mount})`;
  } catch {
    return 'unknown';
  }
}
