/**
 * Admission against a real scratch volume (issue 3, test 7, second half), on RabbitMQ: a
 * tiny tmpfs (512 KiB) is mounted and used as a worker's scratch root. The worker
 * measures free space on it itself (statfs, no injected `freeBytes`) and must not lease
 * a job unless every running job's declared output reserve plus the new one's fits.
 *
 * Mounting needs root (as the test machines and CI run); the volume is unmounted in
 * `after`, or on the way out if the process ends first.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmdirSync, statfsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import type { Broker } from '../broker/broker.js';
import { RabbitMqBroker } from '../broker/rabbitmq.js';
import { Harness } from '../../test/testing/harness.js';
import { rabbitMqUrl } from '../../test/testing/services.js';
import { waitFor } from '../../test/testing/wait.js';
import { bulkyReserveBytes, halfReserveBytes } from '../../test/worker/fixtures/reserve-jobs.js';
import type { WorkerEvent } from './worker-events.js';

const reserveJobsModule = fileURLToPath(new URL('../../test/worker/fixtures/reserve-jobs.js', import.meta.url));
const volumeBytes = 512 * 1024;

interface Volume {
  path: string;
  unmount(): void;
}

/** Mounts a tmpfs of `bytes` on a fresh folder; unmounted by `unmount()`, or at exit or on SIGINT/SIGTERM. */
function mountTmpfs(bytes: number): Volume {
  const path = mkdtempSync(join(tmpdir(), 'planrun-tiny-scratch-'));
  const mount = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${bytes}`, 'tmpfs', path], { encoding: 'utf8' });
  if (mount.status !== 0) {
    rmdirSync(path);
    throw new Error(`cannot mount a tmpfs on ${path} (${mount.status ?? mount.signal}): ${mount.stderr.trim()}`);
  }
  let mounted = true;
  const unmount = () => {
    if (!mounted) return;
    mounted = false;
    process.off('exit', unmount);
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    // Lazily if busy: the mount goes as soon as nothing uses it.
    if (spawnSync('umount', [path]).status !== 0) spawnSync('umount', ['-l', path]);
    rmdirSync(path);
  };
  function onSignal(signal: NodeJS.Signals): void {
    try {
      unmount();
    } finally {
      process.exit(signal === 'SIGINT' ? 130 : 143);
    }
  }
  process.on('exit', unmount);
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return { path, unmount };
}

function freeBytes(path: string): number {
  const stats = statfsSync(path);
  return stats.bavail * stats.bsize;
}

// Mounting needs root, which the test machines and CI have; elsewhere this fails loudly
// rather than skipping, since a skipped test proves nothing.
assert.equal(process.getuid?.(), 0, 'the tmpfs admission test mounts a volume and must run as root');

describe('admission on a real, tiny scratch volume (tmpfs, RabbitMQ)', () => {
  let volume: Volume;
  const brokers: Broker[] = [];

  async function connect(): Promise<Broker> {
    const broker = await RabbitMqBroker.connect({ url: rabbitMqUrl, heartbeatSeconds: 2 });
    brokers.push(broker);
    return broker;
  }

  async function withHarness(body: (harness: Harness) => Promise<void>): Promise<void> {
    const harness = await new Harness({ broker: await connect() }).start();
    try {
      await body(harness);
    } finally {
      await harness.close();
    }
  }

  before(() => {
    volume = mountTmpfs(volumeBytes);
  });

  after(async () => {
    try {
      await Promise.all(brokers.map((broker) => broker.close().catch(() => undefined)));
    } finally {
      volume?.unmount();
    }
  });

  const refusals = (events: WorkerEvent[], jobId: string) => events.filter((e) => e.type === 'admission_refused' && e.jobId === jobId);
  const leases = (events: WorkerEvent[], jobId: string) => events.filter((e) => e.type === 'lease_granted' && e.jobId === jobId);

  it('a job whose output reserve exceeds the scratch volume is not started there; a worker with room runs it', () =>
    withHarness(async (harness) => {
      const free = freeBytes(volume.path);
      assert.ok(free <= volumeBytes && free < bulkyReserveBytes, `${free} bytes free on the tmpfs`);
      const tiny = await harness.startWorker(await connect(), { slots: 1, jobModules: [reserveJobsModule], scratchRoot: volume.path });
      const { job } = await harness.orchestrator.submit({ tenant: 'acme', type: 'bulky', input: { runLog: harness.runLog } });

      // Refused, given back, delivered again, refused again: the message keeps coming back.
      await waitFor('three refusals', () => refusals(tiny.events, job.id).length >= 3);
      for (const refusal of refusals(tiny.events, job.id)) {
        assert.deepEqual(refusal, { type: 'admission_refused', jobId: job.id, attempt: 1, reason: 'no_disk_reserve' });
      }
      assert.equal(leases(tiny.events, job.id).length, 0, 'no lease asked for, none granted');
      assert.equal(harness.runs(job.id).length, 0, 'the job did not run');
      assert.deepEqual(readdirSync(volume.path), [], 'no scratch folder was even made');
      const queued = await harness.ledger.getJob(job.id);
      assert.equal(queued?.state, 'queued');
      assert.equal(queued?.attempt, 1);
      assert.deepEqual(await harness.ledger.getAttempts(job.id), []);

      // A worker whose scratch volume (the harness's temp dir) has room takes it.
      const roomy = await harness.startWorker(await connect(), { slots: 1, jobModules: [reserveJobsModule] });
      const result = await waitFor('the result', () => harness.resultsFor(job.id)[0]);
      assert.equal(result.routingKey, 'acme.bulky.finished');
      assert.equal(result.body.attempt, 1);
      assert.equal(leases(roomy.events, job.id).length, 1);
      assert.equal(leases(tiny.events, job.id).length, 0, 'the tiny volume never got the job');
      assert.deepEqual(
        harness.runs(job.id).map((run) => run.attempt),
        [1],
      );
      assert.equal((await harness.ledger.getAttempts(job.id))[0]?.worker, roomy.worker.id);
    }));

  it("reserves add up: a job that fits alone waits while another's reserve takes the room, then runs", () =>
    withHarness(async (harness) => {
      const free = freeBytes(volume.path);
      assert.ok(free >= halfReserveBytes && free < 2 * halfReserveBytes, `${free} bytes free: room for one 300 KiB reserve, not two`);
      // Two slots, so it is the disk, not the slots, that keeps the second job out.
      const tiny = await harness.startWorker(await connect(), { slots: 2, jobModules: [reserveJobsModule], scratchRoot: volume.path });
      let peak = 0;
      tiny.worker.onEvent(() => (peak = Math.max(peak, tiny.worker.runningJobs)));
      const gate = join(harness.dir.path, 'let-the-first-finish');
      const { job: first } = await harness.orchestrator.submit({ tenant: 'acme', type: 'half', input: { runLog: harness.runLog, hold: gate } });
      await waitFor('the first job to run', () => harness.runs(first.id).length === 1);
      const { job: second } = await harness.orchestrator.submit({ tenant: 'acme', type: 'half', input: { runLog: harness.runLog } });

      await waitFor('two refusals of the second job', () => refusals(tiny.events, second.id).length >= 2);
      for (const refusal of refusals(tiny.events, second.id)) {
        assert.deepEqual(refusal, { type: 'admission_refused', jobId: second.id, attempt: 1, reason: 'no_disk_reserve' });
      }
      assert.equal(leases(tiny.events, second.id).length, 0);
      assert.equal(harness.runs(second.id).length, 0);
      assert.equal((await harness.ledger.getJob(second.id))?.state, 'queued');

      writeFileSync(gate, '');
      await waitFor('both results', () => harness.resultsFor(first.id).length === 1 && harness.resultsFor(second.id).length === 1);
      assert.equal(harness.resultsFor(second.id)[0]!.body.state, 'finished');
      const firstDone = tiny.events.findIndex((e) => e.type === 'job_done' && e.jobId === first.id);
      const secondLeased = tiny.events.findIndex((e) => e.type === 'lease_granted' && e.jobId === second.id);
      assert.ok(firstDone >= 0 && secondLeased > firstDone, 'the second job was leased only after the first was done');
      assert.equal(peak, 1, 'never two jobs at once on the tiny volume');
    }));
});
