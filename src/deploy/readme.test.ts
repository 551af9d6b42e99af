/**
 * The README, run as a new user runs it: `planrun up` in a fresh folder, then every
 * `npx planrun …` line of the README and its `curl` lines, as written, through a shell in
 * that folder (`npx planrun` stands for the built CLI; `<id>` for a job of the right kind;
 * the port for the one `up` got). The client commands find the API and the key through
 * what `up` saved, as the README says. Along the way, `up`'s console stays for people:
 * readable lines, nothing above info for a session where nothing went wrong.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { Client } from '../client/client.js';
import type { JobSummary, JobView } from '../client/types.js';
import { freePort } from '../../test/testing/free-port.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { makeTestClip } from '../../test/testing/test-clip.js';
import { waitFor } from '../../test/testing/wait.js';
import { cliPath } from '../../test/testing/worker-process.js';

const readme = readFileSync(fileURLToPath(new URL('../../../README.md', import.meta.url)), 'utf8');

/** The lines of the README's `sh` blocks, continuation lines joined. */
function shellLines(): Array<{ block: number; line: string }> {
  const lines: Array<{ block: number; line: string }> = [];
  [...readme.matchAll(/```sh\n([\s\S]*?)```/g)].forEach((match, block) => {
    for (const line of match[1]!.replace(/\\\n\s*/g, '').split('\n')) if (line.trim()) lines.push({ block, line: line.trim() });
  });
  return lines;
}

/** `npx planrun <command> …` lines, by command (`submit --file` apart from `submit`). */
const clientLines = new Map<string, string>();
for (const { line } of shellLines()) {
  const command = /^npx planrun (\S+)/.exec(line)?.[1];
  if (command) clientLines.set(command === 'submit' && / --file /.test(line) ? 'submit --file' : command, line);
}

/** The `curl` block: its lines, in order. */
const curlBlock = (() => {
  const all = shellLines();
  const block = all.find(({ line }) => line.startsWith('curl '))!.block;
  return all.filter((entry) => entry.block === block).map(({ line }) => line);
})();

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

describe('the README, run as written against planrun up', () => {
  const dir = tempDir('planrun-readme-');
  let up: ChildProcess;
  let output = '';
  let port: number;
  let client: Client;

  /** Runs one README line through a shell in the folder `up` runs in. */
  function sh(line: string, substitutions: Record<string, string> = {}, timeout = 60_000): Run {
    let command = line.replace(/^npx planrun /, `"${process.execPath}" "${cliPath}" `).replaceAll('127.0.0.1:7700', `127.0.0.1:${port}`);
    for (const [placeholder, value] of Object.entries(substitutions)) command = command.replaceAll(placeholder, value);
    const { PLANRUN_URL: _url, PLANRUN_KEY: _key, PLANRUN_AMQP_URL: _amqp, PLANRUN_LEDGER: _ledger, ...env } = process.env;
    const run = spawnSync('sh', ['-c', command], { cwd: dir.path, encoding: 'utf8', timeout, env });
    return { code: run.status, stdout: run.stdout, stderr: run.stderr };
  }

  function readmeLine(command: string): string {
    const line = clientLines.get(command);
    assert.ok(line, `the README shows npx planrun ${command}`);
    return line;
  }

  before(async () => {
    port = await freePort();
    const { PLANRUN_LOG_LEVEL: _level, PLANRUN_LOG_FORMAT: _format, PLANRUN_AMQP_URL: _amqp, PLANRUN_LEDGER: _ledger, ...env } = process.env;
    up = spawn(process.execPath, [cliPath, 'up', '--port', String(port)], { cwd: dir.path, stdio: ['ignore', 'pipe', 'pipe'], env });
    up.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    up.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    await waitFor('planrun up to print its banner', () => output.includes('planrun is up'), 20_000);
    client = new Client({ url: `http://127.0.0.1:${port}`, key: readFileSync(join(dir.path, '.planrun', 'local-key'), 'utf8').trim() });
    await waitFor('two workers in the fleet', async () => (await client.fleet()).workers.length === 2, 20_000);
  });

  after(() => {
    if (up.exitCode === null) {
      const children = spawnSync('pgrep', ['-P', String(up.pid)], { encoding: 'utf8' })
        .stdout.split('\n')
        .filter(Boolean)
        .map(Number);
      up.kill('SIGKILL');
      for (const pid of children) process.kill(pid, 'SIGKILL');
    }
    dir.remove();
  });

  it('shows exactly the client commands this test runs', () => {
    assert.deepEqual([...clientLines.keys()].sort(), [
      'cancel',
      'demo',
      'failures',
      'fleet',
      'jobs',
      'logs',
      'retry',
      'status',
      'submit',
      'submit --file',
      'watch',
    ]);
    assert.match(readmeLine('submit'), /^npx planrun submit transcode --input '\{\}' --wait /);
  });

  it('submit --wait renders the test clip and exits 0; jobs lists it; status shows it with its outputs, stored where the README says', () => {
    const submitted = sh(readmeLine('submit'), {}, 120_000);
    assert.equal(submitted.code, 0, submitted.stderr + submitted.stdout);
    const [id, final] = submitted.stdout.trim().split('\n');
    assert.match(final!, new RegExp(`^${id} finished, attempt 1/3`));

    const jobs = sh(readmeLine('jobs'));
    assert.equal(jobs.code, 0, jobs.stderr);
    assert.match(jobs.stdout, /^ID +TYPE +STATE +ATTEMPT +PROGRESS +UPDATED$/m);
    assert.match(jobs.stdout, new RegExp(`^${id} +transcode +finished +1/3 +100% `, 'm'));

    const status = sh(readmeLine('status'), { '<id>': id! });
    assert.equal(status.code, 0, status.stderr);
    assert.match(status.stdout, /^state +finished, attempt 1\/3$/m);
    const outputs = [...status.stdout.matchAll(/^output +(\S+) +(\S+)$/gm)].map((m) => ({ name: m[1]!, where: m[2]! }));
    assert.ok(outputs.length >= 2, status.stdout);
    for (const { name, where } of outputs) {
      const path = resolve(dir.path, where);
      assert.equal(path, join(dir.path, '.planrun', 'outputs', 'local', id!, '1', name));
      assert.ok(existsSync(path), path);
    }
  });

  it('submit --file with no object store passes the clip by its path, says so, and the worker on this machine renders it', () => {
    makeTestClip(dir.path);
    const submitted = sh(readmeLine('submit --file'), {}, 120_000);
    assert.equal(submitted.code, 0, submitted.stderr + submitted.stdout);
    const clip = join(dir.path, 'clip.mp4');
    assert.ok(submitted.stderr.includes(`no object store; source is the file's path, ${clip}, which only a worker on this machine can read`), submitted.stderr);
    const [id, final] = submitted.stdout.trim().split('\n');
    assert.match(final!, new RegExp(`^${id} finished, attempt 1/3`));
    assert.match(submitted.stdout, /^result: .*"source":"[^"]*\/clip\.mp4"/m);
  });

  it('watch follows a running job with progress to its end, exit 0', async () => {
    const { id } = await client.submit('sleep', { ms: 1500, steps: 5 });
    const watched = sh(readmeLine('watch'), { '<id>': id });
    assert.equal(watched.code, 0, watched.stderr);
    assert.match(watched.stdout, new RegExp(`^${id} finished, attempt 1/3`));
    assert.match(watched.stderr, new RegExp(`^${id} {2}running {2}attempt 1/3 {2}\\d+% {2}step \\d of 5$`, 'm'));
  });

  it('logs prints what a transcode job logged: the FFmpeg command of each rendition, and what it made', async () => {
    const { id } = await client.submit('transcode', {});
    assert.equal((await client.wait(id, { timeoutMs: 120_000 })).state, 'finished');
    const logs = sh(readmeLine('logs'), { '<id>': id });
    assert.equal(logs.code, 0, logs.stderr);
    assert.match(logs.stdout, /^rendering rendition "\S+": ffmpeg .* \{"rendition":"\S+"\}$/m);
    assert.match(logs.stdout, /^rendered rendition "\S+": \d+x\d+, \d+ bytes /m);
  });

  it('cancel stops a running job (said at info on up’s console, not as a warning) and fails a queued one at once', async () => {
    const { id } = await client.submit('sleep', { ms: 120_000, steps: 120 });
    await waitFor('the job to run', async () => (await client.get(id)).state === 'running', 20_000);
    const running = sh(readmeLine('cancel'), { '<id>': id });
    assert.equal(running.code, 0, running.stderr);
    assert.match(running.stdout, new RegExp(`^${id} running, attempt 1/3: cancel requested; its worker stops it at its next heartbeat`));
    const ended: JobView = await client.wait(id);
    assert.equal(ended.reason, 'cancelled');
    await waitFor('up’s console to say the worker stopped it', () =>
      new RegExp(`^\\d\\d:\\d\\d:\\d\\d {2}INFO {3}worker \\d+ {2}job cancelled; stopping it {2}jobId=${id} attempt=1$`, 'm').test(output),
    );

    // Four slots filled, the fifth job waits in the queue until cancelled.
    const fillers = await Promise.all([1, 2, 3, 4].map(() => client.submit('sleep', { ms: 120_000, steps: 120 })));
    const queued: JobSummary = await client.submit('sleep', { ms: 10 });
    await waitFor(
      'four jobs running',
      async () => (await Promise.all(fillers.map((job) => client.get(job.id)))).every((job) => job.state === 'running'),
      20_000,
    );
    const cancelled = sh(readmeLine('cancel'), { '<id>': queued.id });
    assert.equal(cancelled.code, 0, cancelled.stderr);
    assert.equal(cancelled.stdout, `${queued.id} failed (cancelled), attempt 1/3\n`);

    await waitFor('the fleet to show every slot busy', async () => (await client.fleet()).workers.every((worker) => worker.running === 2), 20_000);
    const fleet = sh(readmeLine('fleet'));
    assert.equal(fleet.code, 0, fleet.stderr);
    const [header, ...rows] = fleet.stdout.trim().split('\n');
    assert.match(header!, /^WORKER +RUNNING +JOB TYPES +CAPABILITIES +LAST HEARTBEAT$/);
    assert.equal(rows.length, 2);
    for (const row of rows) assert.match(row, /^\S+ +2\/2 +\S*sleep\S* +\S+ +(just now|\d+ s ago)$/);
    await Promise.all(fillers.map((job) => client.cancel(job.id)));
    await Promise.all(fillers.map((job) => client.wait(job.id)));
  });

  it('failures shows a job no worker can run under its error code; retry makes a new job from it and prints its id', async () => {
    const failed = await client.submit('no-such-type', {});
    assert.equal((await client.wait(failed.id)).reason, 'unroutable');
    const failures = sh(readmeLine('failures'));
    assert.equal(failures.code, 0, failures.stderr);
    assert.match(failures.stdout, new RegExp(`^no-such-type +unroutable +1 +.* ${failed.id}$`, 'm'));
    const retried = sh(readmeLine('retry'), { '<id>': failed.id });
    assert.equal(retried.code, 0, retried.stderr);
    const newId = retried.stdout.trim();
    assert.equal((await client.get(newId)).retryOf, failed.id);
    assert.equal((await client.get(failed.id)).retriedBy, newId);
  });

  it('the curl lines submit (once per idempotency key), read the job, and stream its events to the end', async () => {
    assert.equal(curlBlock[0], 'KEY=$(cat .planrun/local-key)');
    const [keyLine, post, get, events] = curlBlock;
    assert.match(post!, /^curl -s -X POST http:\/\/127\.0\.0\.1:7700\/v1\/jobs /);
    const first = sh(`${keyLine}\n${post}`);
    assert.equal(first.code, 0, first.stderr);
    const job = JSON.parse(first.stdout) as { id: string; type: string; created: boolean; idempotencyKey: string };
    assert.equal(job.type, 'transcode');
    assert.equal(job.idempotencyKey, 'clip-42');
    const again = JSON.parse(sh(`${keyLine}\n${post}`).stdout) as { id: string; created: boolean };
    assert.deepEqual([job.created, again.id, again.created], [true, job.id, false]);

    const streamed = sh(`${keyLine}\n${events}`, { '<id>': job.id }, 120_000);
    assert.equal(streamed.code, 0, streamed.stderr);
    const states = [...streamed.stdout.matchAll(/^event: state\ndata: (.*)$/gm)].map((m) => (JSON.parse(m[1]!) as { state: string }).state);
    assert.equal(states.at(-1), 'finished', streamed.stdout);

    const read = sh(`${keyLine}\n${get}`, { '<id>': job.id });
    assert.equal(read.code, 0, read.stderr);
    const shown = JSON.parse(read.stdout) as { id: string; state: string; result: { outputs: Record<string, string> } };
    assert.equal(shown.id, job.id);
    assert.equal(shown.state, 'finished');
    assert.ok(Object.keys(shown.result.outputs).length >= 2);
  });

  it('demo runs as written: every job final, one result message each', () => {
    const demo = sh(readmeLine('demo'), {}, 180_000);
    assert.equal(demo.code, 0, demo.stdout + demo.stderr);
    assert.match(demo.stdout, /each with exactly one result message/);
  });

  it('up’s console held readable lines only, none above info, and up stops on SIGTERM with code 0', async () => {
    const logLines = output.split('\n').filter((line) => /^\d\d:\d\d:\d\d {2}[A-Z]+ /.test(line));
    assert.ok(logLines.length > 0);
    assert.deepEqual(
      logLines.filter((line) => !/^\d\d:\d\d:\d\d {2}INFO /.test(line)),
      [],
    );
    assert.doesNotMatch(output, /^\{/m);
    const exited = new Promise<number | null>((resolve) => up.once('exit', (code) => resolve(code)));
    up.kill('SIGTERM');
    assert.equal(await exited, 0);
  });
});
