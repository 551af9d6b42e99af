/**
 * Section (1): the transport limit. Raw amqplib on the local RabbitMQ, the way planrun
 * uses it at its best: durable queue, persistent messages, publisher confirms pipelined
 * (a window of unconfirmed publishes), consumed in another process with manual acks.
 */
import { randomBytes } from 'node:crypto';
import amqp from 'amqplib';
import type { BenchEnvironment, BenchProfile } from './options.js';
import { findListeningPid, hrNow, load1, procCpuMs, RssSampler, sleep, summarise, until } from './measure.js';
import { latencyMark } from './peer-protocol.js';
import { Peers } from './peers.js';
import type { ThroughputResult } from './results.js';

/** Unconfirmed publishes in flight at once. */
export const publishWindow = 1_000;

export async function runTransport(profile: BenchProfile, env: BenchEnvironment, cpuProfileDir?: string): Promise<ThroughputResult> {
  const loadAtStart = load1();
  const queue = `bench-${randomBytes(4).toString('hex')}.transport`;
  const connection = await amqp.connect(env.amqpUrl);
  const channel = await connection.createConfirmChannel();
  await channel.assertQueue(queue, { durable: true });
  const rabbitPid = findListeningPid(Number(new URL(env.amqpUrl).port || 5672));
  const sampler = new RssSampler(() => (rabbitPid ? [rabbitPid] : []));
  const peers = new Peers(cpuProfileDir);
  try {
    await peers.start(1, () => ({ mode: 'amqp-consumer', url: env.amqpUrl, queue, prefetch: profile.transportPrefetch }));
    const body = Buffer.from(JSON.stringify({ jobId: '00000000-0000-0000-0000-000000000000', attempt: 1, tenant: 'bench', type: 'bench-noop' }));

    const publish = (id: string, headers?: Record<string, unknown>) =>
      new Promise<void>((resolve, reject) => {
        channel.sendToQueue(queue, body, { persistent: true, messageId: id, headers }, (error: unknown) =>
          error ? reject(error instanceof Error ? error : new Error('the broker refused the message')) : resolve(),
        );
      });

    // Warm-up, then latency one message at a time, then the pipelined run.
    const latencies = await warmUpAndTimeLatency(publish, peers, profile);
    const before = peers.done;
    const serverCpuBefore = rabbitPid ? procCpuMs(rabbitPid) : 0;
    const t0 = hrNow();
    await publishMany(publish, profile.transportMessages, 'm');
    await until('every message to be consumed', () => peers.done >= before + profile.transportMessages, profile.sectionTimeoutMs);
    const seconds = (peers.lastAt - t0) / 1000;
    const serverCpuMsPerJob = rabbitPid ? (procCpuMs(rabbitPid) - serverCpuBefore) / profile.transportMessages : undefined;
    const rss = peers.peakRss();
    const serverRss = sampler.stop();
    return {
      count: profile.transportMessages,
      seconds,
      perSecond: profile.transportMessages / seconds,
      latency: summarise(latencies),
      serverRssMiB: rabbitPid ? serverRss.get(rabbitPid) : undefined,
      server: 'RabbitMQ',
      workerRssMiB: rss.processMiB,
      serverCpuMsPerJob,
      load: [loadAtStart, load1()],
      notes: [`1 consumer process, prefetch ${profile.transportPrefetch}; ${publishWindow} unconfirmed publishes in flight`],
    };
  } finally {
    sampler.stop();
    await peers.stop();
    await channel.deleteQueue(queue).catch(() => undefined);
    await connection.close().catch(() => undefined);
  }
}

/**
 * The part of a transport section before the pipelined run: `warmupJobs` messages
 * consumed, then `latencySamples` messages one at a time, each timed from publish to
 * the consumer's callback. Returns the latencies in milliseconds.
 */
export async function warmUpAndTimeLatency(
  publish: (id: string, headers?: Record<string, boolean>) => Promise<void>,
  peers: Peers,
  profile: BenchProfile,
): Promise<number[]> {
  await publishMany(publish, profile.warmupJobs, 'w');
  await until('the warm-up to be consumed', () => peers.done >= profile.warmupJobs, profile.sectionTimeoutMs);
  const latencies: number[] = [];
  for (let i = 0; i < profile.latencySamples; i++) {
    const id = `l${i}`;
    const started = peers.waitStarted(id);
    const t0 = hrNow();
    await publish(id, { [latencyMark]: true });
    latencies.push((await started) - t0);
    await sleep(5);
  }
  await until('the latency messages to be counted', () => peers.done >= profile.warmupJobs + profile.latencySamples, 10_000);
  return latencies;
}

export async function publishMany(publish: (id: string) => Promise<void>, count: number, prefix: string): Promise<void> {
  const inFlight = new Set<Promise<void>>();
  for (let i = 0; i < count; i++) {
    const confirmed: Promise<void> = publish(`${prefix}${i}`).finally(() => inFlight.delete(confirmed));
    inFlight.add(confirmed);
    if (inFlight.size >= publishWindow) await Promise.race(inFlight);
  }
  await Promise.all(inFlight);
}
