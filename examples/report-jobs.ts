/**
 * A job-types module as a user writes one: `planrun worker --jobs ./report-jobs.ts`.
 * One job type sums a CSV file it downloads and writes a report; it shows the three error
 * classes, progress, stopping on the signal, and outputs written in the scratch folder.
 */
import { createReadStream } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Readable } from 'node:stream';
import { setTimeout as delay } from 'node:timers/promises';
import { defineJobType, FatalError, PermanentError, TransientError, type JobContext, type JobRunResult, type JobType } from 'planrun';

interface ReportInput {
  url: string;
  column: string;
}

function parseInput(input: unknown): ReportInput {
  const { url, column } = (input ?? {}) as Partial<Record<keyof ReportInput, unknown>>;
  if (typeof url !== 'string' || typeof column !== 'string') {
    throw new PermanentError('invalid_input', 'input must be { url: string, column: string }');
  }
  return { url, column };
}

async function download(url: string, file: string, signal: AbortSignal): Promise<void> {
  const response = await fetch(url, { signal });
  if (response.status === 429 || response.status >= 500) {
    throw new TransientError('source_unavailable', `${url} answered ${response.status}`);
  }
  if (!response.ok || response.body === null) throw new PermanentError('source_refused', `${url} answered ${response.status}`);
  await writeFile(file, Readable.fromWeb(response.body));
}

async function sumColumn(ctx: JobContext, file: string, column: string): Promise<{ rows: number; total: number }> {
  const lines = createInterface({ input: createReadStream(file), crlfDelay: Infinity });
  let index = -1;
  let rows = 0;
  let total = 0;
  for await (const line of lines) {
    ctx.signal.throwIfAborted();
    const cells = line.split(',');
    if (index < 0) {
      index = cells.indexOf(column);
      if (index < 0) throw new PermanentError('no_such_column', `the CSV has no column "${column}"`);
      continue;
    }
    const value = Number(cells[index]);
    if (Number.isNaN(value)) throw new PermanentError('not_a_number', `row ${rows + 1}: "${cells[index] ?? ''}" is not a number`);
    total += value;
    rows += 1;
    if (rows % 10_000 === 0) {
      ctx.progress(0.5, `${rows} rows`);
      await delay(0); // let an abort through on a long file
    }
  }
  return { rows, total };
}

const csvReport: JobType = defineJobType({
  name: 'csv-report',
  outputReserveBytes: 10 * 1024 ** 2,
  async run(ctx): Promise<JobRunResult> {
    const { url, column } = parseInput(ctx.input);
    const source = join(ctx.scratchDir, 'source.csv');
    await download(url, source, ctx.signal);
    ctx.progress(0.1, 'downloaded');
    const { rows, total } = await sumColumn(ctx, source, column);
    await writeFile(join(ctx.scratchDir, 'report.json'), JSON.stringify({ url, column, rows, total }, null, 2));
    return { data: { rows, total }, outputs: ['report.json'] };
  },
});

// A type needing a GPU: offered only by workers started with `--capabilities gpu`.
const gpuCheck = defineJobType({
  name: 'gpu-check',
  requires: ['gpu'],
  run({ jobId, attempt }) {
    if (process.env.CUDA_VISIBLE_DEVICES === '') throw new FatalError('no_gpu', 'this worker has no GPU it can use');
    return { data: { jobId, attempt } };
  },
});

export default [csvReport, gpuCheck];
