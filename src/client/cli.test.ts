/**
 * The client commands of the built CLI (`submit`, `status`, `watch`, `jobs`, `cancel`, `fleet`), run as
 * child processes against the real API (orchestrator, SQLite ledger, a `probe` worker,
 * embedded broker) listening on a real socket.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { Command } from 'commander';
import { startApi, type ApiFixture } from '../../test/api/fixture.js';
import { EmbeddedBroker } from '../broker/embedded.js';
import { apiKey, apiUrl, talkingToApi } from '../cli/client-options.js';
import { registerCancelCommand } from '../cli/commands/cancel.js';
import { registerFailuresCommand } from '../cli/commands/failures.js';
import { registerFleetCommand } from '../cli/commands/fleet.js';
import { registerJobsCommand } from '../cli/commands/jobs.js';
import { registerRetryCommand } from '../cli/commands/retry.js';
import { registerStatusCommand } from '../cli/commands/status.js';
import { registerSubmitCommand } from '../cli/commands/submit.js';
import { registerWatchCommand } from '../cli/commands/watch.js';
import { ProgressDisplay } from '../cli/job-output.js';
import { UsageError } from '../cli/options.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { waitFor } from '../../test/testing/wait.js';
import { Client } from './client.js';
import type { JobSummary, JobView } from './types.js';

const cliMain = fileURLToPath(new URL('../cli/main.js', import.meta.url));

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

interface Running {
  /** What it has written so far. */
  output: { stdout: string; stderr: string };
  done: Promise<Run>;
}

/** Starts the CLI (asynchronously: the API it talks to lives in this process). */
function start(args: string[], env: Record<string, string> = {}): Running {
  const { PLANRUN_URL: _url, PLANRUN_KEY: _key, ...inherited } = process.env;
  const child = spawn(process.execPath, [cliMain, ...args], { env: { ...inherited, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const output = { stdout: '', stderr: '' };
  child.stdout.on('data', (chunk: Buffer) => (output.stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output.stderr += chunk.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  const done = new Promise<Run>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, ...output });
    });
  });
  return { output, done };
}

/** Runs the CLI to its end. */
function planrun(args: string[], env: Record<string, string> = {}): Promise<Run> {
  return start(args, env).done;
}

function lines(text: string): string[] {
  return text.trim().split('\n').filter(Boolean);
}

describe('the client commands of the CLI, against the real API', () => {
  let broker: EmbeddedBroker;
  let api: ApiFixture;
  let client: Client;
  let connection: string[];
  const emptyDir = tempDir('planrun-cli-');
  const probe = (input: { ms: number; steps?: number; fail?: 'permanent' }) => JSON.stringify({ runLog: api.harness.runLog, ...input });

  before(async () => {
    broker = new EmbeddedBroker();
    api = await startApi(broker.connect());
    await api.harness.startWorker(broker.connect(), { slots: 4 });
    client = new Client({ url: api.url, key: api.acmeKey });
    connection = ['--url', api.url, '--key', api.acmeKey];
    await waitFor('the worker in the fleet', async () => (await client.fleet()).workers.length > 0);
  });
  after(async () => {
    await api.close();
    await broker.close();
    emptyDir.remove();
  });

  it('submit prints the job id alone on stdout and its state on stderr; the same idempotency key prints the same one, saying so', async () => {
    const key = `cli-${Date.now()}`;
    const args = ['submit', 'probe', '--input', probe({ ms: 10 }), '--max-attempts', '2', '--idempotency-key', key, ...connection];
    const first = await planrun(args);
    assert.equal(first.code, 0, first.stderr);
    const id = first.stdout.trim();
    assert.match(id, /^\S+$/);
    assert.equal(first.stdout, `${id}\n`, 'stdout is the id alone');
    assert.match(first.stderr, new RegExp(`^${id} (queued|running|finished), attempt 1/2$`, 'm'));
    assert.doesNotMatch(first.stderr, /used before/);
    const job = await client.get(id);
    assert.equal(job.maxAttempts, 2);
    assert.equal(job.type, 'probe');

    const [second, otherType] = await Promise.all([planrun(args), planrun(['submit', 'sleep', '--idempotency-key', key, ...connection])]);
    assert.equal(second.code, 0, second.stderr);
    assert.equal(second.stdout, `${id}\n`);
    assert.match(
      second.stderr,
      new RegExp(
        `^planrun: idempotency key "${key}" was used before: this is the job it named \\(a probe job, submitted \\S+\\), unchanged; nothing new was submitted$`,
        'm',
      ),
    );
    // The same key with another job body names no job: refused, naming the key and the job it did name.
    assert.equal(otherType.code, 2, otherType.stderr);
    assert.equal(otherType.stdout, '');
    assert.match(
      otherType.stderr,
      new RegExp(`idempotency key "${key}" was used for job ${id} with another submission .*\\(idempotency_conflict, HTTP 409\\)`),
    );
  });

  it('submit of a job that fails at once (no worker offers its type) prints its state and error, exit 1', async () => {
    const run = await planrun(['submit', 'nosuchtype', ...connection]);
    assert.equal(run.code, 1, run.stderr);
    const id = run.stdout.trim();
    assert.equal(run.stdout, `${id}\n`);
    assert.match(run.stderr, new RegExp(`^${id} failed \\(unroutable\\), attempt 1/3$`, 'm'));
    assert.match(run.stderr, /^error: unroutable \(permanent\): .*nosuchtype/m);
    assert.doesNotMatch(run.stderr, /planrun watch/);

    // What it asked for shows in status, to compare with `planrun fleet`.
    const needsGpu = await planrun(['submit', 'probe', '--requires', 'gpu,ffmpeg', ...connection]);
    assert.equal(needsGpu.code, 1, needsGpu.stderr);
    assert.match(needsGpu.stderr, /^error: unroutable \(permanent\): .*"gpu"/m);
    const status = await planrun(['status', needsGpu.stdout.trim(), ...connection]);
    assert.match(status.stdout, /^requires +ffmpeg, gpu$/m);
  });

  it('submit --wait follows the job with progress and exits 0 once it finished, 1 once it failed, printing the result or the error', async () => {
    const [ok, failed] = await Promise.all([
      planrun(['submit', 'probe', '--input', probe({ ms: 300, steps: 3 }), '--wait', ...connection]),
      planrun(['submit', 'probe', '--input', probe({ ms: 50, steps: 1, fail: 'permanent' }), '--wait', ...connection]),
    ]);
    assert.equal(ok.code, 0, ok.stderr);
    const [id, final, result] = lines(ok.stdout);
    assert.match(final!, new RegExp(`^${id} finished, attempt 1/3, \\d+ ms after submission$`));
    assert.match(result!, /^result: \{"pid":\d+,"attempt":1\}$/);
    assert.match(ok.stdout, /output: probe-output\.txt \S+/);
    // stderr is not a terminal here: plain lines, one per change, ending at the terminal state.
    const progress = lines(ok.stderr);
    assert.ok(
      progress.some((line) => /running {2}attempt 1\/3 {2}\d+% {2}step \d/.test(line)),
      ok.stderr,
    );
    assert.ok(!ok.stderr.includes('\r'), 'no redraws when stderr is not a terminal');
    assert.match(progress.at(-1)!, / finished {2}attempt 1\/3$/);

    assert.equal(failed.code, 1, failed.stderr);
    assert.match(failed.stdout, /^\S+ failed \(permanent\), attempt 1\/3, \d+ ms after submission$/m);
    assert.match(failed.stdout, /error: probe_permanent \(permanent\): failed permanently on purpose/);
  });

  it('status --json prints the job as the API returns it; status alone, a summary with the attempts', async () => {
    const { id } = await client.submit('probe', JSON.parse(probe({ ms: 50, steps: 1 })));
    await client.wait(id);
    const [json, summary] = await Promise.all([planrun(['status', id, '--json', ...connection]), planrun(['status', id, ...connection])]);
    assert.equal(json.code, 0, json.stderr);
    const shown = JSON.parse(json.stdout) as JobView;
    assert.deepEqual(shown, await client.get(id));

    assert.equal(summary.code, 0, summary.stderr);
    assert.match(summary.stdout, new RegExp(`^job +${id}$`, 'm'));
    assert.match(summary.stdout, /^state +finished, attempt 1\/3$/m);
    assert.match(summary.stdout, /^result +\{"pid":\d+,"attempt":1\}$/m);
    assert.match(summary.stdout, /^ATTEMPT +WORKER +STARTED +ENDED +OUTCOME/m);
    assert.match(summary.stdout, /^1 +\S+ +\S+ \S+ +\S+ \S+ +finished$/m);
  });

  it('jobs prints a table of the tenant’s jobs, filtered by state and type', async () => {
    const { id } = await client.submit('probe', JSON.parse(probe({ ms: 10 })));
    await client.wait(id);
    const run = await planrun(['jobs', '--state', 'finished', '--type', 'probe', '--limit', '100', ...connection]);
    assert.equal(run.code, 0, run.stderr);
    const [header, ...rows] = lines(run.stdout);
    assert.match(header!, /^ID +TYPE +STATE +ATTEMPT +PROGRESS +UPDATED$/);
    assert.ok(
      rows.some((row) => row.startsWith(`${id} `) && /probe +finished +1\/3 +100% +\S+ \S+$/.test(row)),
      run.stdout,
    );
    assert.ok(rows.length >= 1 && rows.every((row) => / finished /.test(row)));
  });

  it('watch shows progress until the end, then the final state; exit 0 if it finished, 1 if it failed', async () => {
    const ended = await client.submit('probe', JSON.parse(probe({ ms: 10, steps: 1 })));
    await client.wait(ended.id);
    const { id } = await client.submit('probe', JSON.parse(probe({ ms: 60_000, steps: 600 })));
    const watching = start(['watch', id, ...connection]);
    const again = await planrun(['watch', ended.id, ...connection]);
    // Once it shows progress, the job is cancelled: watch follows it to its end.
    await waitFor('watch to show progress', () => / running {2}attempt 1\/3 {2}\d+% {2}step \d+\n/.test(watching.output.stderr), 15_000);
    await client.cancel(id);
    const run = await watching.done;
    assert.equal(run.code, 1, run.stderr);
    assert.match(lines(run.stdout).at(0)!, new RegExp(`^${id} failed \\(cancelled\\), attempt 1/3, `));
    assert.match(lines(run.stderr).at(-1)!, new RegExp(`^${id} {2}failed \\(cancelled\\) {2}attempt 1/3$`));

    // A job that already ended: its final state at once.
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, new RegExp(`^${ended.id} finished, attempt 1/3`));
    assert.equal(lines(again.stderr).length, 1);
  });

  it('cancel: a queued job fails as cancelled at once, a running one at its next heartbeat; an ended one says so', async () => {
    // Four long jobs fill the worker's four slots; the fifth waits in the queue.
    const running = await Promise.all([1, 2, 3, 4].map(() => client.submit('probe', JSON.parse(probe({ ms: 60_000, steps: 600 })))));
    await waitFor(
      'four jobs running',
      async () => (await Promise.all(running.map((job) => client.get(job.id)))).every((job) => job.state === 'running'),
      15_000,
    );
    const queued = await client.submit('probe', JSON.parse(probe({ ms: 10 })));
    const [first, second] = running;

    // The queued one first: a cancelled running job frees a slot the queued one would take.
    const cancelQueued = await planrun(['cancel', queued.id, ...connection]);
    const cancelRunning = await planrun(['cancel', first!.id, ...connection]);
    assert.equal(cancelQueued.code, 0, cancelQueued.stderr);
    assert.equal(cancelQueued.stdout, `${queued.id} failed (cancelled), attempt 1/3\n`);
    assert.equal(cancelRunning.code, 0, cancelRunning.stderr);
    assert.equal(
      cancelRunning.stdout,
      `${first!.id} running, attempt 1/3: cancel requested; its worker stops it at its next heartbeat (follow it with: planrun watch ${first!.id})\n`,
    );
    assert.equal((await client.wait(first!.id)).reason, 'cancelled');

    // Cancelled already: said, exit 0. Finished: nothing to cancel, exit 1. Unknown: exit 2.
    const finished = await client.submit('probe', JSON.parse(probe({ ms: 10 })));
    await Promise.all(running.slice(1).map((job) => client.cancel(job.id)));
    await client.wait(finished.id);
    const [again, tooLate, unknown] = await Promise.all([
      planrun(['cancel', queued.id, ...connection]),
      planrun(['cancel', finished.id, ...connection]),
      planrun(['cancel', 'no-such-job', ...connection]),
    ]);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(again.stdout, `${queued.id} failed (cancelled), attempt 1/3: it was cancelled already\n`);
    assert.equal(tooLate.code, 1);
    assert.equal(tooLate.stdout, `${finished.id} finished, attempt 1/3\n`);
    assert.equal(tooLate.stderr, `planrun: job ${finished.id} had already ended (finished); nothing to cancel\n`);
    assert.equal(unknown.code, 2);
    assert.equal(unknown.stderr, 'planrun: no job no-such-job (not_found, HTTP 404)\n');
    await Promise.all([second, ...running.slice(2)].map((job) => client.wait(job!.id)));
  });

  it('fleet prints the workers as a table; --json as the API returns it', async () => {
    const [table, json] = await Promise.all([planrun(['fleet', ...connection]), planrun(['fleet', '--json', ...connection])]);
    assert.equal(table.code, 0, table.stderr);
    const [header, ...rows] = lines(table.stdout);
    assert.match(header!, /^WORKER +RUNNING +JOB TYPES +CAPABILITIES +LAST HEARTBEAT$/);
    const { workers } = await client.fleet();
    assert.equal(rows.length, workers.length);
    assert.match(rows[0]!, new RegExp(`^${workers[0]!.id} +\\d/4 +\\S*probe\\S* +\\S+ +(just now|\\d+ s ago)$`));
    assert.equal(json.code, 0, json.stderr);
    assert.deepEqual(
      (JSON.parse(json.stdout) as { workers: Array<{ id: string }> }).workers.map((w) => w.id),
      workers.map((w) => w.id),
    );
  });

  it('says how to get a key, names an unreachable URL, and refuses --input that is not JSON, each in one line, exit 2', async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const offline = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    await new Promise((resolve) => server.close(resolve));

    const [noKey, unreachable, badInput] = await Promise.all([
      planrun(['status', 'x', '--url', api.url, '--data-dir', emptyDir.path]),
      planrun(['submit', 'probe', '--input', '{}', '--url', offline, '--key', 'k']),
      planrun(['submit', 'probe', '--input', '{ms: 1}', ...connection]),
    ]);
    assert.equal(noKey.code, 2);
    assert.match(noKey.stderr, /^planrun: no API key/);
    assert.match(noKey.stderr, /`planrun up` prints one and saves it there/);
    assert.match(noKey.stderr, /planrun keys create --tenant T/);
    assert.equal(lines(noKey.stderr).length, 1);

    assert.equal(unreachable.code, 2);
    assert.ok(unreachable.stderr.startsWith(`planrun: cannot reach planrun at ${offline}`), unreachable.stderr);
    assert.match(unreachable.stderr, /Start it with `planrun up`/);

    assert.equal(badInput.code, 2);
    assert.match(badInput.stderr, /^planrun: --input is not valid JSON/);
  });
});

describe('the client commands’ options, in process', () => {
  let broker: EmbeddedBroker;
  let api: ApiFixture;

  before(async () => {
    broker = new EmbeddedBroker();
    api = await startApi(broker.connect());
  });
  after(async () => {
    await api.close();
    await broker.close();
  });

  function withEnv<T>(env: Record<string, string | undefined>, body: () => T): T {
    const saved = Object.fromEntries(Object.keys(env).map((name) => [name, process.env[name]]));
    const apply = (values: Record<string, string | undefined>) => {
      for (const [name, value] of Object.entries(values)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    };
    apply(env);
    try {
      return body();
    } finally {
      apply(saved);
    }
  }

  it('takes the key from --key, else PLANRUN_KEY, else the key file planrun up saved; the URL from --url, else PLANRUN_URL', () => {
    const dataDir = tempDir('planrun-cli-data-');
    try {
      writeFileSync(join(dataDir.path, 'local-key'), 'saved-key\n');
      withEnv({ PLANRUN_KEY: undefined, PLANRUN_URL: undefined }, () => {
        assert.equal(apiKey({ dataDir: dataDir.path }), 'saved-key');
        assert.equal(apiUrl({ dataDir: dataDir.path }), 'http://127.0.0.1:7700');
        assert.equal(apiKey({ dataDir: dataDir.path, key: 'flag-key' }), 'flag-key');
        assert.throws(() => apiKey({ dataDir: join(dataDir.path, 'elsewhere') }), /no API key.*planrun keys create --tenant T/);
      });
      withEnv({ PLANRUN_KEY: 'env-key', PLANRUN_URL: 'http://planrun.internal:7700' }, () => {
        assert.equal(apiKey({ dataDir: dataDir.path }), 'env-key');
        assert.equal(apiUrl({ dataDir: dataDir.path }), 'http://planrun.internal:7700');
        assert.equal(apiUrl({ dataDir: dataDir.path, url: 'http://other:1' }), 'http://other:1');
      });
    } finally {
      dataDir.remove();
    }
  });

  it('turns a refused key and an unknown job into one line saying what to do', async () => {
    const flags = { url: api.url, dataDir: '.planrun' };
    const refused = new Client({ url: api.url, key: 'wrong' });
    await assert.rejects(
      talkingToApi(flags, () => refused.get('x')),
      (error: Error) => {
        assert.ok(error instanceof UsageError);
        assert.match(error.message, /refused the API key \(unknown or revoked API key\)\. Pass a valid one with --key or PLANRUN_KEY/);
        return true;
      },
    );
    const client = new Client({ url: api.url, key: api.acmeKey });
    await assert.rejects(
      talkingToApi(flags, () => client.get('no-such-job')),
      /^UsageError: no job no-such-job \(not_found, HTTP 404\)$/,
    );
  });

  it('the progress line redraws in place on a terminal, and leaves it on a new line at the end', () => {
    const writes: string[] = [];
    const terminal = { isTTY: true, columns: 100, write: (chunk: string) => writes.push(chunk) } as unknown as NodeJS.WriteStream;
    const display = new ProgressDisplay(terminal, 0);
    const base: JobSummary = {
      id: 'job-1',
      type: 'probe',
      tenant: 'acme',
      state: 'queued',
      attempt: 1,
      maxAttempts: 3,
      timeoutSeconds: null,
      limits: null,
      requires: [],
      idempotencyKey: null,
      cancelRequested: false,
      progress: null,
      progressMessage: null,
      result: null,
      error: null,
      reason: null,
      createdAt: '2026-01-01T00:00:00.000Z',
      updatedAt: '2026-01-01T00:00:00.000Z',
      startedAt: null,
      endedAt: null,
    };
    display.update({ type: 'state', job: { ...base, state: 'running', progress: null } });
    display.update({ type: 'progress', job: { ...base, state: 'running', progress: 0.5, progressMessage: 'halfway' } });
    display.update({ type: 'state', job: { ...base, state: 'finished', progress: 1 } });
    display.finish();
    assert.ok(
      writes.slice(0, -1).every((w) => w.startsWith('\r\x1b[2K')),
      'each draw clears the line first',
    );
    assert.match(writes[1]!, /^\r\x1b\[2Krunning {3}50% \[#{15}-{15}\] {2}attempt 1\/3 {2}halfway$/);
    assert.match(writes.at(-2)!, /^\r\x1b\[2Kfinished {2}attempt 1\/3$/);
    assert.equal(writes.at(-1), '\n');
    assert.ok(
      writes.every((w) => w.length <= 100 + 5),
      'no draw is wider than the terminal',
    );
  });

  it('fleet with no worker says what that means for queued jobs', async () => {
    const run = await planrun(['fleet', '--url', api.url, '--key', api.acmeKey]);
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stdout, 'no workers: none has sent a heartbeat lately, so queued jobs wait (start one with planrun worker, or planrun up)\n');
  });

  it('every client command has --help, and says the saved URL wins over the default', () => {
    const program = new Command('planrun');
    registerSubmitCommand(program);
    registerStatusCommand(program);
    registerWatchCommand(program);
    registerJobsCommand(program);
    registerCancelCommand(program);
    registerFleetCommand(program);
    registerRetryCommand(program);
    registerFailuresCommand(program);
    for (const command of program.commands) {
      const help = command.helpInformation();
      assert.match(help, new RegExp(`^Usage: planrun ${command.name()} `));
      assert.match(help, /--url <url>/);
      assert.match(help, /--key <key>/);
      assert.match(help, /--data-dir <dir>/);
      assert.match(help.replace(/\s+/g, ' '), /default: the URL planrun up saved in <data-dir>\/local-url, else http:\/\/127\.0\.0\.1:7700/);
    }
    assert.deepEqual(
      program.commands.map((c) => c.name()),
      ['submit', 'status', 'watch', 'jobs', 'cancel', 'fleet', 'retry', 'failures'],
    );
  });
});

describe('planrun retry and planrun failures, against the real API', () => {
  let broker: EmbeddedBroker;
  let api: ApiFixture;
  let client: Client;
  let connection: string[];

  before(async () => {
    broker = new EmbeddedBroker();
    api = await startApi(broker.connect());
    await api.harness.startWorker(broker.connect(), { slots: 4 });
    client = new Client({ url: api.url, key: api.acmeKey });
    connection = ['--url', api.url, '--key', api.acmeKey];
  });
  after(async () => {
    await api.close();
    await broker.close();
  });

  const failedProbe = async (n: number) => {
    const job = await client.submit('probe', { runLog: api.harness.runLog, ms: 1, fail: 'permanent', n });
    assert.equal((await client.wait(job.id)).state, 'failed');
    return job.id;
  };

  it('retry <id> prints the new job id; again, the same id, saying so; a job that did not fail exits 1; a bad call exits 2', async () => {
    const id = await failedProbe(1);
    const first = await planrun(['retry', id, ...connection]);
    assert.equal(first.code, 0, first.stderr);
    const newId = first.stdout.trim();
    assert.equal(first.stdout, `${newId}\n`, 'stdout is the new id alone');
    assert.equal((await client.get(newId)).retryOf, id);
    const again = await planrun(['retry', id, ...connection]);
    assert.deepEqual([again.code, again.stdout], [0, `${newId}\n`]);
    assert.match(again.stderr, new RegExp(`job ${id} was retried before: its retry is ${newId}`));
    const status = await planrun(['status', id, ...connection]);
    assert.match(status.stdout, new RegExp(`retried +as ${newId}`));

    const done = await client.submit('probe', { runLog: api.harness.runLog, ms: 1 });
    await client.wait(done.id);
    const notFailed = await planrun(['retry', done.id, ...connection]);
    assert.equal(notFailed.code, 1);
    assert.match(notFailed.stderr, new RegExp(`planrun: job ${done.id} is finished: only a failed or cancelled job can be retried`));
    assert.equal((await planrun(['retry', 'no-such-job', ...connection])).code, 2);
    const both = await planrun(['retry', id, '--failed', ...connection]);
    assert.equal(both.code, 2);
    assert.match(both.stderr, /leave out the job id/);
    assert.equal((await planrun(['retry', ...connection])).code, 2);
    assert.match((await planrun(['retry', id, '--code', 'x', ...connection])).stderr, /--code filters a bulk retry: add --failed/);
    // The new job fails as the old one did, and waits in the holding area for the next test.
    assert.equal((await client.wait(newId)).state, 'failed');
  });

  it('failures shows the holding area; retry --failed --type --code redrives a group, printing the new ids and how many', async () => {
    // With the retry the test before made, which failed too.
    const ids = [...(await client.failures()).map((g) => g.sampleJobId), await failedProbe(2), await failedProbe(3)];
    const table = await planrun(['failures', ...connection]);
    assert.equal(table.code, 0, table.stderr);
    assert.match(table.stdout, /^TYPE +CODE +JOBS +FIRST +LAST +SAMPLE\nprobe +probe_permanent +3 /);
    const bulk = await planrun(['retry', '--failed', '--type', 'probe', '--code', 'probe_permanent', ...connection]);
    assert.equal(bulk.code, 0, bulk.stderr);
    const made = lines(bulk.stdout);
    assert.equal(made.length, 3);
    assert.equal(bulk.stderr, 'retried 3 failed jobs\n');
    assert.deepEqual((await Promise.all(made.map(async (id) => (await client.get(id)).retryOf))).sort(), [...ids].sort());
    const none = await planrun(['retry', '--failed', '--type', 'probe', '--until', '2020-01-01T00:00:00Z', ...connection]);
    assert.deepEqual([none.code, none.stdout, none.stderr], [0, '', 'retried 0 failed jobs\n']);
    const badTime = await planrun(['retry', '--failed', '--since', 'last tuesday', ...connection]);
    assert.equal(badTime.code, 2);
    assert.match(badTime.stderr, /endedAfter must be an ISO 8601 time/);
  });
});
