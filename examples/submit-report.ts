/**
 * An app submitting a job and waiting for it with planrun's typed client:
 * `PLANRUN_URL=http://127.0.0.1:7700 PLANRUN_KEY=... node submit-report.js <csv url> <column>`.
 */
import { Client, isPlanrunApiError, type TerminalJobView } from 'planrun';

const [url, column] = process.argv.slice(2);
if (url === undefined || column === undefined) throw new Error('usage: submit-report <csv url> <column>');

const client = new Client({ url: process.env.PLANRUN_URL ?? 'http://127.0.0.1:7700', key: process.env.PLANRUN_KEY ?? '' });

try {
  const submitted = await client.submit('csv-report', { url, column }, { idempotencyKey: `report-${url}-${column}` });
  const job: TerminalJobView = await client.wait(submitted.id, { timeoutMs: 10 * 60_000 });
  if (job.state === 'finished') {
    console.log('total:', job.result?.data, 'report at', job.result?.outputs?.['report.json']);
  } else {
    const last = job.attempts.at(-1)?.error;
    console.error(`failed (${job.reason ?? 'unknown'}): ${job.error?.code ?? ''} ${job.error?.message ?? ''}`);
    if (last?.stack !== undefined) console.error(last.stack);
    process.exitCode = 1;
  }
} catch (error) {
  if (isPlanrunApiError(error)) console.error(`planrun answered ${error.code}: ${error.message}`);
  else throw error;
  process.exitCode = 2;
}
