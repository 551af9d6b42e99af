import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { JobView } from '../../client/types.js';
import { createLogger } from '../../core/logger.js';
import { runDemo } from '../../deploy/demo.js';
import { LocalStack } from '../../deploy/local-stack.js';
import { defaultLedgerConfig } from '../../ledger/ledger.js';
import { formatPercent, progressBar, table } from '../job-output.js';
import { amqpUrlFrom, queueTypeFrom } from '../amqp-url.js';
import type { DemoFlags } from './demo.js';

export async function demo(flags: DemoFlags): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'planrun-demo-'));
  const amqp = amqpUrlFrom(flags);
  const queueType = queueTypeFrom(flags, amqp);
  const prefix = flags.prefix ?? `planrun-demo-${process.pid}`;
  const logger = createLogger('planrun-demo', process.env.PLANRUN_LOG_LEVEL ?? 'error');
  const stack = await LocalStack.start({
    dataDir,
    host: '127.0.0.1',
    port: 0,
    ...(amqp ? { amqp, queueType } : {}),
    workers: 2,
    slots: 2,
    jobs: [],
    capabilities: [],
    // Short leases so the killed worker's job is back within seconds, not minutes.
    ledgerConfig: { ...defaultLedgerConfig, leaseTtlMs: 4000, backoffBaseMs: 500 },
    sweepIntervalMs: 250,
    heartbeatIntervalMs: 1000,
    stopGraceMs: 30_000,
    prefix,
    logger,
    workerLogLevel: process.env.PLANRUN_LOG_LEVEL ?? 'error',
  });
  console.log(`planrun demo: API ${stack.url}, broker ${stack.brokerDescription} (prefix ${prefix}), data in ${dataDir}`);
  const board = new ProgressBoard();
  try {
    const outcome = await runDemo(stack, {
      good: flags.jobs,
      broken: flags.broken,
      clipSeconds: flags.clipSeconds,
      onProgress: (jobs) => board.draw(jobs),
      onNote: (line) => board.note(line),
    });
    console.log('');
    console.log(
      table(
        ['job', 'state', 'attempts', 'result messages', 'outcome'],
        outcome.jobs.map((job) => [
          job.id,
          job.state === 'failed' ? `failed/${job.reason}` : job.state,
          job.attempts.map((a) => `${a.attempt}:${a.outcome ?? 'running'}`).join(' '),
          String(outcome.resultMessages.get(job.id) ?? 0),
          job.state === 'finished' ? `${Object.keys(job.result?.outputs ?? {}).length} renditions` : truncate(job.error?.message ?? '', 90),
        ]),
      ),
    );
    console.log('');
    if (outcome.problems.length > 0) {
      for (const problem of outcome.problems) console.log(`NOT AS PROMISED: ${problem}`);
      process.exitCode = 1;
    } else {
      console.log("Every job ended finished or failed, each with exactly one result message; the killed worker's job ran again as its next attempt.");
    }
  } finally {
    await stack.stop();
    if (flags.keep !== true) rmSync(dataDir, { recursive: true, force: true });
  }
}

/** The jobs' progress bars: redrawn in place on a terminal, a line per change elsewhere. */
class ProgressBoard {
  private drawn = 0;
  private readonly shown = new Map<string, string>();
  private readonly tty = process.stdout.isTTY === true;

  draw(jobs: JobView[]): void {
    const lines = jobs.map((job) => {
      const state = job.state === 'failed' ? `failed/${job.reason}` : job.state;
      const progress = job.state === 'finished' ? 1 : job.state === 'running' ? (job.progress ?? 0) : 0;
      return `${job.id.slice(0, 8)}  ${progressBar(progress)} ${formatPercent(progress).padStart(4)}  attempt ${job.attempt}  ${state}`;
    });
    if (this.tty) {
      if (this.drawn > 0) process.stdout.write(`\x1b[${this.drawn}A`);
      for (const line of lines) process.stdout.write(`\x1b[2K${line}\n`);
      this.drawn = lines.length;
      return;
    }
    jobs.forEach((job, i) => {
      const key = `${job.state} ${job.attempt} ${Math.floor((job.progress ?? 0) * 4)}`;
      if (this.shown.get(job.id) !== key) {
        this.shown.set(job.id, key);
        console.log(lines[i]);
      }
    });
  }

  note(line: string): void {
    if (this.tty && this.drawn > 0) {
      process.stdout.write(`\x1b[${this.drawn}A\x1b[2K${line}\n`);
      this.drawn = 0;
      return;
    }
    console.log(line);
  }
}

function truncate(text: string, length: number): string {
  const line = text.split('\n')[0] ?? '';
  return line.length > length ? `${line.slice(0, length - 1)}…` : line;
}
