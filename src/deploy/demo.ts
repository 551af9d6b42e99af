/**
 * `planrun demo`: a batch of transcodes (a few with filter settings FFmpeg refuses) on a
 * local planrun, a worker killed mid-run, and the proof at the end: every job in a final
 * state, and exactly one result message per job.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { Client } from '../client/client.js';
import type { JobView, TerminalJobView } from '../client/types.js';
import type { LocalStack } from './local-stack.js';

export interface DemoOptions {
  /** Transcodes that should finish, and ones with a broken filter that should fail permanently. */
  good: number;
  broken: number;
  /** Length of each generated clip; FFmpeg renders it in real time, so progress is visible. */
  clipSeconds: number;
  /** Called with every job's latest view while the batch runs, and once at the end. */
  onProgress(jobs: JobView[]): void;
  onNote: (line: string) => void;
}

export interface DemoOutcome {
  jobs: TerminalJobView[];
  /** Result messages received per job id. */
  resultMessages: Map<string, number>;
  killedWorkerPid: number | undefined;
  /** What the demo expected and did not see; empty when all went as planned. */
  problems: string[];
}

export async function runDemo(stack: LocalStack, options: DemoOptions): Promise<DemoOutcome> {
  const { counts: resultMessages, stop: stopCounting } = await countResultMessages(stack);
  const client = new Client({ url: stack.url, key: stack.key });
  const submissions = [
    ...Array.from({ length: options.good }, (_, i) => ({
      type: 'transcode',
      input: { durationSeconds: options.clipSeconds, filter: 'realtime' },
      idempotencyKey: `demo-${Date.now()}-good-${i}`,
    })),
    ...Array.from({ length: options.broken }, (_, i) => ({
      type: 'transcode',
      input: { durationSeconds: 1, filter: `nosuchfilter=${i}` },
      idempotencyKey: `demo-${Date.now()}-broken-${i}`,
    })),
  ];
  const submitted = await client.submitMany(submissions);
  options.onNote(`submitted ${submitted.length} transcodes (${options.broken} with a filter FFmpeg refuses)`);

  const latest = new Map<string, JobView>();
  let killedWorkerPid: number | undefined;
  const finals = Promise.all(submitted.map((job) => client.wait(job.id)));
  let done = false;
  void finals.finally(() => (done = true));
  while (!done) {
    const views = await Promise.all(submitted.map((job) => client.get(job.id)));
    for (const view of views) latest.set(view.id, view);
    options.onProgress(views);
    if (killedWorkerPid === undefined) killedWorkerPid = killAWorkerMidJob(views, options.onNote);
    await Promise.race([finals, delay(250)]);
  }
  const jobs = await finals;
  const withAttempts = await Promise.all(jobs.map(async (job) => (await client.get(job.id)) as TerminalJobView));
  options.onProgress(withAttempts);
  // The relay may still be confirming the last result messages: give them a moment.
  for (let waited = 0; waited < 5000 && jobs.some((job) => (resultMessages.get(job.id) ?? 0) === 0); waited += 100) await delay(100);
  await stopCounting();
  return { jobs: withAttempts, resultMessages, killedWorkerPid, problems: check(withAttempts, resultMessages, options.good, killedWorkerPid) };
}

/** Once some job runs at 20% or more, SIGKILL the worker running it (its pid is in its worker id). */
function killAWorkerMidJob(views: JobView[], note: (line: string) => void): number | undefined {
  const victim = views.find((job) => job.state === 'running' && (job.progress ?? 0) >= 0.2);
  const worker = victim?.attempts.at(-1)?.worker;
  if (!victim || !worker) return undefined;
  const pid = Number(worker.split('-').at(-2));
  if (!Number.isInteger(pid)) return undefined;
  note(`killing worker ${worker} (pid ${pid}) with SIGKILL while it runs job ${victim.id}`);
  process.kill(pid, 'SIGKILL');
  return pid;
}

/** Counts result messages by message id on a queue of its own, removed by `stop`. */
async function countResultMessages(stack: LocalStack): Promise<{ counts: Map<string, number>; stop: () => Promise<void> }> {
  const counts = new Map<string, number>();
  const queue = `${stack.topology.prefix}.demo-results`;
  await stack.broker.declareQueue(queue);
  await stack.broker.bindQueue(queue, stack.topology.resultsExchange, '#');
  const subscription = await stack.broker.consume(
    queue,
    (delivery) => {
      const id = delivery.messageId ?? '(no id)';
      counts.set(id, (counts.get(id) ?? 0) + 1);
      delivery.ack();
    },
    { prefetch: 100 },
  );
  return {
    counts,
    stop: async () => {
      await subscription.cancel();
      await stack.broker.deleteQueue(queue);
    },
  };
}

function check(jobs: TerminalJobView[], resultMessages: Map<string, number>, good: number, killed: number | undefined): string[] {
  const problems: string[] = [];
  for (const job of jobs) {
    const messages = resultMessages.get(job.id) ?? 0;
    if (messages !== 1) problems.push(`job ${job.id}: ${messages} result messages, expected exactly 1`);
  }
  const finished = jobs.filter((job) => job.state === 'finished').length;
  if (finished !== good) problems.push(`${finished} transcodes finished, expected ${good}`);
  for (const job of jobs.slice(good)) {
    if (job.state !== 'failed' || job.reason !== 'permanent' || job.attempts.length !== 1) {
      problems.push(`broken transcode ${job.id} ended ${job.state}/${job.reason} after ${job.attempts.length} attempts, expected failed/permanent after 1`);
    }
  }
  if (killed === undefined) problems.push('no worker was killed: no job ran long enough');
  return problems;
}
