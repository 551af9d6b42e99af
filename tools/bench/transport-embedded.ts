/**
 * Section (1e): the embedded broker's own limit, the counterpart of (1) for section (3).
 * The broker as `planrun up` runs it (stored in broker.db, synchronous=FULL, served on a
 * Unix socket); messages published from the broker's process, as the orchestrator's relay
 * does, each confirmed once stored, pipelined; consumed with acks by another process over
 * the socket, as a worker consumes. What no planrun job can beat: each moves several
 * messages through this broker.
 */
import { randomBytes } from 'node:crypto';
import { EmbeddedBrokerService } from '../../src/deploy/embedded-broker-service.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import type { BenchProfile } from './options.js';
import { cpuMs, hrNow, load1, procStatusMiB, summarise, until } from './measure.js';
import { Peers } from './peers.js';
import type { ThroughputResult } from './results.js';
import { publishMany, publishWindow, warmUpAndTimeLatency } from './transport.js';

export async function runEmbeddedTransport(profile: BenchProfile, cpuProfileDir?: string): Promise<ThroughputResult> {
  const loadAtStart = load1();
  const dir = tempDir('planrun-bench-transport-');
  const queue = `bench-${randomBytes(4).toString('hex')}.transport`;
  const service = await EmbeddedBrokerService.start(dir.path);
  const broker = service.broker.connect();
  const peers = new Peers(cpuProfileDir);
  try {
    await broker.declareQueue(queue);
    await peers.start(1, () => ({ mode: 'embedded-consumer', socketPath: service.socketPath, queue, prefetch: profile.transportPrefetch }));
    const body = Buffer.from(JSON.stringify({ jobId: '00000000-0000-0000-0000-000000000000', attempt: 1, tenant: 'bench', type: 'bench-noop' }));
    const publish = (id: string, headers?: Record<string, boolean>) => broker.sendToQueue(queue, body, { messageId: id, ...(headers ? { headers } : {}) });

    // Warm-up, then latency one message at a time, then the pipelined run.
    const latencies = await warmUpAndTimeLatency(publish, peers, profile);
    const before = peers.done;
    const brokerCpuBefore = cpuMs();
    const consumerCpuBefore = peers.cpuMs();
    const t0 = hrNow();
    await publishMany(publish, profile.transportMessages, 'm');
    await until('every message to be consumed', () => peers.done >= before + profile.transportMessages, profile.sectionTimeoutMs);
    const seconds = (peers.lastAt - t0) / 1000;
    return {
      count: profile.transportMessages,
      seconds,
      perSecond: profile.transportMessages / seconds,
      latency: summarise(latencies),
      serverRssMiB: procStatusMiB('self', 'VmHWM'),
      server: 'embedded (publisher in its process)',
      workerRssMiB: peers.peakRss().processMiB,
      serverCpuMsPerJob: (cpuMs() - brokerCpuBefore) / profile.transportMessages,
      workerCpuMsPerJob: (peers.cpuMs() - consumerCpuBefore) / profile.transportMessages,
      load: [loadAtStart, load1()],
      notes: [`1 consumer process over the Unix socket, prefetch ${profile.transportPrefetch}; ${publishWindow} unconfirmed publishes in flight`],
    };
  } finally {
    await peers.stop();
    await broker.close();
    await service.stop();
    dir.remove();
  }
}
