/**
 * Issue 18, finding 6, through `planrun up` as a user runs it (embedded broker, SQLite):
 * a Fatal error reaches the job's attempts and the job runs again at once on the other
 * worker; Ctrl-C hands back the jobs still running after `--stop-grace`, so they run
 * again after a restart without waiting a lease TTL; a second Ctrl-C stops at once.
 * Every lease lasts 60 s: a test that waited for one to run out would time out.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, describe, it } from 'node:test';
import { openSqliteLedger } from '../ledger/sqlite/sqlite-ledger.js';
import { freePort } from '../../test/testing/free-port.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { waitFor } from '../../test/testing/wait.js';
import { cliPath } from '../../test/testing/worker-process.js';

const errorsModule = pathToFileURL(join(cliPath, '..', '..', 'core', 'errors.js')).href;

// gpu: attempt 1 finds the GPU locked (Fatal); nap: attempt 1 takes `firstMs`, later ones `thenMs`.
const jobsSource = `
import { FatalError } from ${JSON.stringify(errorsModule)};
import { setTimeout as delay } from 'node:timers/promises';
export default [
  { name: 'gpu', async run({ attempt }) {
    if (attempt === 1) throw new FatalError('gpu_locked', 'the GPU does not answer');
    return { data: { attempt } };
  } },
  { name: 'nap', async run({ input, attempt, signal }) {
    await delay(attempt === 1 ? input.firstMs : input.thenMs, undefined, { signal });
    return { data: { attempt } };
  } },
];
`;

interface Up {
  child: ChildProcess;
  url: string;
  output(): string;
  exited: Promise<{ code: number | null; at: number }>;
}

const dir = tempDir('planrun-worker-life-');
const jobsModule = join(dir.path, 'life-jobs.mjs');
writeFileSync(jobsModule, jobsSource);
const running: Up[] = [];

afterEach(() => {
  for (const up of running.splice(0)) {
    if (up.child.exitCode !== null) continue;
    const children = spawnSync('pgrep', ['-P', String(up.child.pid)], { encoding: 'utf8' })
      .stdout.split('\n')
      .filter(Boolean)
      .map(Number);
    up.child.kill('SIGKILL');
    for (const pid of children) process.kill(pid, 'SIGKILL');
  }
});

async function startUp(dataDir: string, extra: string[]): Promise<Up> {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [
      cliPath,
      'up',
      '--port',
      String(port),
      '--data-dir',
      dataDir,
      '--jobs',
      jobsModule,
      '--lease-ttl',
      '60s',
      '--backoff',
      '60s',
      '--heartbeat-interval',
      '500ms',
      ...extra,
    ],
    { cwd: dir.path, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<{ code: number | null; at: number }>((resolve) => child.once('exit', (code) => resolve({ code, at: Date.now() })));
  const up: Up = { child, url: `http://127.0.0.1:${port}`, output: () => output, exited };
  running.push(up);
  await waitFor('planrun up to print its banner', () => output.includes('planrun is up'), 20_000);
  return up;
}

function api(up: Up, dataDir: string) {
  const key = readFileSync(join(dataDir, 'local-key'), 'utf8').trim();
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  return {
    async submit(type: string, input: unknown): Promise<string> {
      const res = await fetch(`${up.url}/v1/jobs`, { method: 'POST', headers, body: JSON.stringify({ type, input }) });
      assert.equal(res.status, 202, await res.clone().text());
      return ((await res.json()) as { id: string }).id;
    },
    async job(id: string): Promise<JobView> {
      return (await (await fetch(`${up.url}/v1/jobs/${id}`, { headers })).json()) as JobView;
    },
    async fleetSize(): Promise<number> {
      return ((await (await fetch(`${up.url}/v1/fleet`, { headers })).json()) as { workers: unknown[] }).workers.length;
    },
  };
}

interface JobView {
  state: string;
  attempt: number;
  attempts: Array<{ attempt: number; outcome: string | null; error: { class: string; code: string } | null }>;
}

async function ledgerJob(dataDir: string, id: string) {
  const ledger = await openSqliteLedger({ path: join(dataDir, 'ledger.db') });
  try {
    return { job: await ledger.getJob(id), attempts: await ledger.getAttempts(id) };
  } finally {
    await ledger.close();
  }
}

describe('workers under planrun up: Fatal errors and stopping hand jobs back', () => {
  it('a FatalError(gpu_locked) is recorded on attempt 1 and the other worker runs attempt 2 at once', async () => {
    const dataDir = join(dir.path, 'fatal');
    const up = await startUp(dataDir, ['--workers', '2', '--slots', '1']);
    const client = api(up, dataDir);
    await waitFor('two workers in the fleet', async () => (await client.fleetSize()) === 2, 20_000);
    const id = await client.submit('gpu', {});
    const view = await waitFor(
      'the job to finish',
      async () => {
        const job = await client.job(id);
        return job.state === 'finished' ? job : undefined;
      },
      20_000,
    );
    assert.equal(view.attempt, 2);
    assert.deepEqual(
      view.attempts.map((a) => [a.attempt, a.outcome, a.error?.class, a.error?.code]),
      [
        [1, 'released', 'fatal', 'gpu_locked'],
        [2, 'finished', undefined, undefined],
      ],
    );
  });

  it('Ctrl-C with a short --stop-grace hands the running job back; after a restart it runs to the end at once', async () => {
    const dataDir = join(dir.path, 'stop');
    const up = await startUp(dataDir, ['--workers', '1', '--slots', '1', '--stop-grace', '300ms']);
    const client = api(up, dataDir);
    const id = await client.submit('nap', { firstMs: 120_000, thenMs: 200 });
    await waitFor('the job to run', async () => (await client.job(id)).state === 'running', 20_000);
    const signalled = Date.now();
    up.child.kill('SIGINT');
    const exit = await up.exited;
    assert.equal(exit.code, 0, up.output());
    assert.ok(exit.at - signalled < 10_000, `up took ${exit.at - signalled} ms to stop`);
    const stopped = await ledgerJob(dataDir, id);
    assert.deepEqual([stopped.job?.state, stopped.job?.attempt], ['queued', 2], 'handed back: attempt 2 is due now');
    assert.deepEqual(
      stopped.attempts.map((a) => [a.outcome, a.error?.code]),
      [['released', 'worker_stopped']],
    );

    const again = await startUp(dataDir, ['--workers', '1', '--slots', '1']);
    const view = await waitFor(
      'the job to finish after the restart',
      async () => {
        const job = await api(again, dataDir).job(id);
        return job.state === 'finished' ? job : undefined;
      },
      20_000,
    );
    assert.equal(view.attempt, 2);
    again.child.kill('SIGINT');
    await again.exited;
  });

  it('a second Ctrl-C stops at once: the running job is handed back without waiting the stop grace', async () => {
    const dataDir = join(dir.path, 'twice');
    const up = await startUp(dataDir, ['--workers', '1', '--slots', '1', '--stop-grace', '60s']);
    const client = api(up, dataDir);
    const id = await client.submit('nap', { firstMs: 120_000, thenMs: 200 });
    await waitFor('the job to run', async () => (await client.job(id)).state === 'running', 20_000);
    up.child.kill('SIGINT');
    await waitFor('the first stop to begin', () => up.output().includes('planrun: stopping'), 5_000);
    const second = Date.now();
    up.child.kill('SIGINT');
    const exit = await up.exited;
    assert.equal(exit.code, 0, up.output());
    assert.ok(exit.at - second < 5_000, `up took ${exit.at - second} ms to stop after the second Ctrl-C`);
    const stopped = await ledgerJob(dataDir, id);
    assert.deepEqual([stopped.job?.state, stopped.job?.attempt], ['queued', 2]);
  });
});
