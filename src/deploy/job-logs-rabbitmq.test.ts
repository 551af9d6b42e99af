/**
 * Issue 14, job logs through `planrun orchestrator` and `planrun worker` on RabbitMQ: a job
 * printing 50 MB keeps its first 64 KiB and last 1 MiB with a marker between, while the
 * worker process's memory stays bounded (its peak resident size, VmHWM, is printed); and
 * `planrun logs --follow` prints a job's lines while it runs and ends when it ends.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { logEntryBytes, logHeadBytes, logTailBytes } from '../wire/logs.js';
import { startProcessPair, type ProcessPair } from '../../test/testing/process-pair.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { waitFor } from '../../test/testing/wait.js';
import { cliPath } from '../../test/testing/worker-process.js';

const logJobsModule = fileURLToPath(new URL('../../test/worker/fixtures/log-jobs.js', import.meta.url));
const MiB = 1024 * 1024;

/** Resident memory of a process, and its peak so far, in bytes (Linux /proc). */
function memoryOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kB = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)![1]) * 1024;
  return { rss: kB('VmRSS'), peak: kB('VmHWM') };
}

describe('job logs through planrun orchestrator and worker (RabbitMQ, SQLite)', () => {
  const dir = tempDir('planrun-job-logs-');
  let pair: ProcessPair;

  before(async () => {
    pair = await startProcessPair({ dir: dir.path, ledger: 'sqlite', workerArgs: ['--slots', '1', '--jobs', logJobsModule], jobTypes: ['chatty', 'flood'] });
  });

  after(async () => {
    await pair.stop();
    dir.remove();
  });

  it("a job printing 50 MB: its log keeps the first 64 KiB and the last 1 MiB with a marker between, and the worker's memory stays bounded", async () => {
    const { client } = pair;
    // A first small job, so the worker has run one and its memory is that of a working worker.
    await client.wait((await client.submit('chatty', { lines: 2, intervalMs: 1 })).id, { timeoutMs: 30_000 });
    const pid = pair.worker.child.pid!;
    const before = memoryOf(pid);
    const submitted = await client.submit('flood', { megabytes: 50 });
    const job = await client.wait(submitted.id, { timeoutMs: 180_000 });
    assert.equal(job.state, 'finished', JSON.stringify(job.error));
    const after = memoryOf(pid);
    const grewMiB = (after.peak - before.rss) / MiB;
    console.log(
      `worker memory while a job printed 50 MB: resident ${(before.rss / MiB).toFixed(1)} MiB before, peak (VmHWM) ${(after.peak / MiB).toFixed(1)} MiB, ` +
        `${grewMiB.toFixed(1)} MiB above`,
    );
    // Holding the 50 MB (500,000 lines, each a string and an object) would take well over 100 MiB;
    // what the bound leaves is the garbage of reading them, which V8 collects when it sees fit.
    assert.ok(
      grewMiB < 64,
      `the worker's peak stayed within 64 MiB of its resident size before (it grew ${grewMiB.toFixed(1)} MiB): it did not hold the 50 MB`,
    );

    const lines = await client.logs(submitted.id);
    const markerAt = lines.findIndex((line) => line.stream === 'planrun');
    assert.ok(markerAt > 0, 'a marker line stands where lines were dropped');
    const head = lines.slice(0, markerAt);
    const tail = lines.slice(markerAt + 1);
    const marker = lines[markerAt]!;
    const size = (kept: typeof lines) => kept.reduce((sum, line) => sum + logEntryBytes(line), 0);
    assert.equal(head[0]?.message, 'flood begins');
    assert.equal(tail.at(-1)?.message, 'flood ends');
    assert.ok(size(head) <= logHeadBytes && size(head) > logHeadBytes - 100, `the head is the first 64 KiB (${size(head)} bytes)`);
    assert.ok(size(tail) <= logTailBytes && size(tail) > logTailBytes - 100, `the tail is the last 1 MiB (${size(tail)} bytes)`);
    const printed = 500_000 + 2;
    assert.equal(head.length + marker.dropped!.lines + tail.length, printed, 'every line printed is kept or counted in the marker');
    assert.equal(size(head) + marker.dropped!.bytes + size(tail), 50_000_000 + 'flood begins\n'.length + 'flood ends\n'.length, '...and every byte');
    assert.match(marker.message, /^\[planrun: \d+ lines \(\d+ bytes\) dropped here/);
    const number = (message: string) => Number(/flood line (\d+)/.exec(message)?.[1]);
    assert.equal(number(tail[0]!.message) - number(head.at(-1)!.message) - 1, marker.dropped!.lines, 'the lines dropped are those between head and tail');
  });

  it('planrun logs --follow prints the lines of a running job as they come, and ends when the job ends', async () => {
    const { client } = pair;
    const submitted = await client.submit('chatty', { lines: 12, intervalMs: 250 });
    const cli = spawn(process.execPath, [cliPath, 'logs', submitted.id, '--follow', '--url', pair.url, '--key', pair.key], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    let errors = '';
    cli.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    cli.stderr.on('data', (chunk: Buffer) => (errors += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => cli.once('exit', (code) => resolve(code)));
    await waitFor('the first lines on the CLI', () => output.includes('out 2\n'), 20_000);
    assert.equal((await client.get(submitted.id)).state, 'running', `lines came while the job ran: ${output}`);
    const code = await exited;
    assert.equal(code, 0, errors);
    assert.equal((await client.get(submitted.id)).state, 'finished', 'the CLI ended once the job had');
    const printed = output.trimEnd().split('\n');
    for (const prefix of ['out', 'err']) {
      assert.deepEqual(
        printed.filter((line) => line.startsWith(`${prefix} `)),
        Array.from({ length: 12 }, (_, i) => `${prefix} ${i + 1}`),
      );
    }
    assert.ok(printed.includes('log 12 {"i":12}'), `ctx.log lines with their fields: ${output}`);
  });
});
