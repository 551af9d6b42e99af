/**
 * The short chaos profile, as CI runs it, on each broker: a RabbitMQ node of the test's
 * own (never the shared one), or the embedded broker run by the orchestrator; an
 * orchestrator and three workers as processes behind fault proxies, a few hundred jobs,
 * every fault kind that applies at least once; the checker must find every invariant
 * held. Then a shorter run with the S3 store (`--store s3`, an s3rver of the run's own),
 * and the HA profile (`--profile ha`: three orchestrators on a private PostgreSQL, a
 * RabbitMQ cluster of three with quorum queues), whose failover figures must be measured
 * and no confirmed submission lost around the node faults.
 * The seeds are fixed (PLANRUN_CHAOS_SEED overrides them), so a failure replays with
 * `npm run chaos -- --broker <broker> --seed <seed>` (plus the run's own arguments).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import type { CheckReport } from './checker.js';
import { embeddedFaultKinds, faultKinds, haFaultKinds } from './plan.js';

const mainPath = fileURLToPath(new URL('./main.js', import.meta.url));
const budgetMs = 5 * 60_000;
const short = { args: ['--profile', 'short'], minAcked: 250, title: 'the short profile', abandons: false };
const runs = [
  // Its orchestrator-partition heal answers lease requests their workers gave up on: with
  // the grant window (half the 1 s TTL) those grants are abandoned, never expired.
  { broker: 'rabbitmq', seed: process.env.PLANRUN_CHAOS_SEED ?? 'ci-1', kinds: faultKinds, ...short, abandons: true },
  { broker: 'embedded', seed: process.env.PLANRUN_CHAOS_SEED ?? 'e-1', kinds: embeddedFaultKinds, ...short },
  // The S3 store, kept short (60 jobs over 20 s of faults, every kind still once; about a
  // minute and a half): the output invariants over the store, and store-cleaned.
  {
    broker: 'embedded',
    seed: process.env.PLANRUN_CHAOS_SEED ?? 's3-1',
    kinds: embeddedFaultKinds,
    args: ['--store', 's3', '--jobs', '60', '--duration', '20'],
    minAcked: 50,
    title: 'the S3 store',
    abandons: false,
  },
  // Two to four minutes, of which the cluster's start takes one or two. Seed ha-2: its
  // broker-kill hits a node that leads no queue; ha-1 kills the leaders' node and meets a
  // RabbitMQ 3.10 bug that fails `quiescent` (docs/high-availability.md).
  {
    broker: 'rabbitmq',
    seed: process.env.PLANRUN_CHAOS_SEED ?? 'ha-2',
    kinds: haFaultKinds,
    args: ['--profile', 'ha'],
    minAcked: 120,
    title: 'the HA profile',
    abandons: false,
  },
] as const;

function rabbitMqInstalled(): boolean {
  if (process.env.PLANRUN_CHAOS_RABBITMQ_BIN) return true;
  if (existsSync('/usr/lib/rabbitmq/bin/rabbitmq-server')) return true;
  return (process.env.PATH ?? '').split(':').some((dir) => existsSync(join(dir, 'rabbitmq-server')));
}

for (const { broker, seed, kinds, args, minAcked, title, abandons } of runs) {
  describe(`chaos: ${title} on the ${broker} broker`, () => {
    it('injects every fault kind that applies and finds every invariant held', { timeout: budgetMs + 60_000 }, async (t) => {
      // The RabbitMQ run starts a node of its own; the test machines and CI have the binaries.
      // Without them this fails, rather than skipping: a skipped chaos run proves nothing.
      if (broker === 'rabbitmq') assert.ok(rabbitMqInstalled(), 'the chaos run needs RabbitMQ installed (rabbitmq-server, or PLANRUN_CHAOS_RABBITMQ_BIN)');
      const started = Date.now();
      const child = spawn(process.execPath, [mainPath, ...args, '--broker', broker, '--seed', seed, '--json'], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      // Cancelled (timeout, Ctrl-C): SIGINT makes the run stop its processes and its RabbitMQ node.
      t.signal.addEventListener('abort', () => child.kill('SIGINT'), { once: true });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
      const elapsed = Date.now() - started;

      let report: CheckReport | undefined;
      try {
        report = JSON.parse(stdout) as CheckReport;
      } catch {
        assert.fail(`the chaos run printed no report (exit code ${code}):\n${stderr.slice(-5000)}`);
      }
      const kept = /kept in (\S+)/.exec(stderr)?.[1];
      const text = kept && existsSync(join(kept, 'report.txt')) ? readFileSync(join(kept, 'report.txt'), 'utf8') : stderr.slice(-5000);
      const violated = report.invariants.filter((i) => i.status === 'violated').map((i) => i.id);
      assert.deepEqual(violated, [], `seed ${seed}: invariants violated\n${text}`);
      assert.equal(code, 0, `seed ${seed}: exit code ${code}\n${text}`);

      const injected = new Set(report.faults.filter((f) => f.ok).map((f) => f.kind));
      assert.deepEqual(
        kinds.filter((k) => !injected.has(k)),
        [],
        'every fault kind injected and healed',
      );
      for (const kind of ['job permanent', 'job transient', 'job crash', 'job hang', 'job fatal', 'job over-reserve write']) {
        assert.ok((report.jobFaults[kind] ?? 0) > 0, `job fault "${kind}" happened`);
      }
      const forgeries = report.invariants.find((i) => i.id === 'forgeries-refused');
      assert.ok(forgeries && forgeries.checked >= 50, `the adversary's forgeries were answered and checked (${forgeries?.checked})`);
      assert.ok(report.jobs.acked >= minAcked, `most of the jobs were acknowledged (${report.jobs.acked})`);
      if (abandons) {
        assert.ok(report.abandons.grants >= 1, `grants were abandoned and the abandon rules checked on them (${JSON.stringify(report.abandons)})`);
      }
      const given: readonly string[] = args;
      if (given.includes('ha')) {
        const failover = report.failover;
        assert.ok(failover, 'the HA run measured its failover figures');
        assert.ok(
          failover.orchestratorKills.length >= 1 && failover.orchestratorKills.every((k) => k.activity > 0),
          'jobs started and settled after each orchestrator kill',
        );
        assert.ok(
          failover.brokerNodeFaults.some((f) => f.confirmed > 0),
          'submissions were confirmed while a RabbitMQ node was down',
        );
        assert.equal(failover.confirmedLost, 0, 'no confirmed submission lost around the RabbitMQ node faults');
        const orchestrators = report.invariants.find((i) => i.id === 'one-effect-across-orchestrators');
        assert.match(orchestrators?.note ?? '', /o1, o2, o3/, 'every orchestrator answered control requests or relayed results');
      }
      if (given.includes('s3')) {
        const cleaned = report.invariants.find((i) => i.id === 'store-cleaned');
        assert.ok(cleaned && cleaned.checked >= minAcked / 2, `the store was listed and its objects judged (${cleaned?.checked})`);
      }
      assert.ok(elapsed < budgetMs, `the run took ${elapsed} ms`);
    });
  });
}
