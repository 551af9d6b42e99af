import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, readlink, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { RunnerLogger } from './logger.js';
import { ProcessPool, type RunHooks, type RunOutcome, type RunTask } from './pool.js';
import { createScratch } from './scratch.js';
import { isAlive } from '../../../test/testing/processes.js';

const SHIPPED_JOBS = new URL('../../job-types/index.js', import.meta.url).href;
const TEST_JOBS = new URL('../../../test/worker/runner/fixtures/misbehaving-jobs.js', import.meta.url).href;
const ORPHANING_PARENT = fileURLToPath(new URL('../../../test/worker/runner/fixtures/orphaning-parent.js', import.meta.url));
const GRACE_MS = 200;
const THROTTLE_MS = 100;

let scratchRoot: string;
let jobCounter = 0;

before(async () => {
  scratchRoot = await mkdtemp(path.join(tmpdir(), 'planrun-pool-test-'));
});
after(async () => {
  await rm(scratchRoot, { recursive: true, force: true });
});

/** Collects what job processes print, so it lands in assertions rather than in the test output. */
function quietLogger(): RunnerLogger & { lines: string[] } {
  const lines: string[] = [];
  const keep = (_fields: object, message: string) => void lines.push(message);
  return { lines, debug: keep, info: keep, warn: keep, error: keep };
}

function newPool(options: Partial<ConstructorParameters<typeof ProcessPool>[0]> = {}): ProcessPool {
  return new ProcessPool({
    jobModules: [SHIPPED_JOBS, TEST_JOBS],
    size: 1,
    progressThrottleMs: THROTTLE_MS,
    abortGraceMs: GRACE_MS,
    logger: quietLogger(),
    ...options,
  });
}

async function task(type: string, input: unknown): Promise<RunTask> {
  const jobId = `job-${++jobCounter}`;
  return { jobId, attempt: 1, tenant: 'acme', type, input, scratchDir: await createScratch(scratchRoot, jobId, 1) };
}

interface Progress {
  fraction: number;
  message: string | undefined;
}

async function runJob(pool: ProcessPool, type: string, input: unknown, hooks: Partial<RunHooks> = {}) {
  const progress: Progress[] = [];
  const runTask = await task(type, input);
  const outcome = await pool.run(runTask, { onProgress: (fraction, message) => progress.push({ fraction, message }), ...hooks });
  return { outcome, progress, scratchDir: runTask.scratchDir };
}

async function pidOfNextJob(pool: ProcessPool): Promise<number> {
  const { outcome } = await runJob(pool, 'whoami', null);
  assert.ok(outcome.ok, `whoami failed: ${JSON.stringify(outcome)}`);
  return (outcome.result.data as { pid: number }).pid;
}

/** `[[[...]]]`, `levels` lists deep, built without recursion. */
function nestedLists(levels: number): unknown {
  let value: unknown = [];
  for (let level = 1; level < levels; level++) value = [value];
  return value;
}

function assertFailed(outcome: RunOutcome, errorClass: string, code: string, message?: RegExp): void {
  assert.equal(outcome.ok, false, `expected a ${errorClass} ${code} failure, got ${JSON.stringify(outcome)}`);
  if (outcome.ok) return;
  assert.equal(outcome.error.class, errorClass, outcome.error.message);
  assert.equal(outcome.error.code, code, outcome.error.message);
  if (message) assert.match(outcome.error.message, message);
}

async function waitUntilDead(pid: number, withinMs: number): Promise<boolean> {
  const deadline = Date.now() + withinMs;
  while (Date.now() < deadline) {
    if (!(await isAlive(pid))) return true;
    await delay(25);
  }
  return !(await isAlive(pid));
}

describe('ProcessPool with well-behaved jobs', () => {
  let pool: ProcessPool;
  before(async () => {
    pool = newPool({ size: 2 });
    await pool.ready();
  });
  after(() => pool.close());

  test('a job returns its data and its output files', async () => {
    const { outcome, scratchDir } = await runJob(pool, 'checksum', { text: 'hello' });
    const sha256 = '2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824';
    assert.deepEqual(outcome, { ok: true, result: { data: { sha256, size: 5 }, outputs: ['checksum.sha256'] } });
    assert.equal(await readFile(path.join(scratchDir, 'checksum.sha256'), 'utf8'), `${sha256}  -\n`);
  });

  test('sleep writes an output file of the requested size', async () => {
    const { outcome, scratchDir } = await runJob(pool, 'sleep', { ms: 0, steps: 1, outputBytes: 100_000 });
    assert.deepEqual(outcome, { ok: true, result: { data: { sleptMs: 0, steps: 1 }, outputs: ['sleep-output.bin'] } });
    assert.equal((await stat(path.join(scratchDir, 'sleep-output.bin'))).size, 100_000);
  });

  test('the same process runs one job after another', async () => {
    assert.equal(await pidOfNextJob(pool), await pidOfNextJob(pool));
  });

  test('a job process is out of the scratch folder once the job returned, so the worker removes an unused folder', async () => {
    const { outcome, scratchDir } = await runJob(pool, 'whoami', null);
    assert.ok(outcome.ok, JSON.stringify(outcome));
    const { pid } = outcome.result.data as { pid: number };
    assert.notEqual(await readlink(`/proc/${pid}/cwd`), scratchDir);
  });

  test('progress reaches the hook with its message', async () => {
    const { outcome, progress } = await runJob(pool, 'sleep', { ms: 450, steps: 3 });
    assert.ok(outcome.ok);
    assert.deepEqual(progress, [
      { fraction: 1 / 3, message: 'step 1 of 3' },
      { fraction: 2 / 3, message: 'step 2 of 3' },
      { fraction: 1, message: 'step 3 of 3' },
    ]);
  });

  test('a burst of progress reports comes through as its first and its last', async () => {
    const { progress } = await runJob(pool, 'progress-burst', 1000);
    assert.deepEqual(progress, [
      { fraction: 1 / 1000, message: 'report 1' },
      { fraction: 1, message: 'report 1000' },
    ]);
  });

  test('a report held back by the throttle is sent when the interval is over, not when the job ends', async () => {
    const started = Date.now();
    const arrivals: number[] = [];
    await runJob(pool, 'progress-then-pause', 10 * THROTTLE_MS, { onProgress: () => void arrivals.push(Date.now() - started) });
    assert.equal(arrivals.length, 2);
    assert.ok(arrivals[1]! - arrivals[0]! >= THROTTLE_MS - 10, `second report ${arrivals[1]! - arrivals[0]!} ms after the first`);
    assert.ok(arrivals[1]! < 8 * THROTTLE_MS, `second report only after ${arrivals[1]} ms, as the job ended`);
  });

  test('progress from a job that already finished does not reach the next job', async () => {
    const size1 = newPool();
    try {
      await runJob(size1, 'progress-after-return', null);
      const { progress } = await runJob(size1, 'sleep', { ms: 200, steps: 1 });
      assert.deepEqual(progress, [{ fraction: 1, message: 'step 1 of 1' }]);
    } finally {
      await size1.close();
    }
  });

  for (const errorClass of ['permanent', 'transient', 'fatal']) {
    test(`a thrown ${errorClass} error keeps its class and code`, async () => {
      const { outcome } = await runJob(pool, 'sleep', { ms: 0, fail: errorClass });
      assertFailed(outcome, errorClass, `requested_${errorClass}`, /failed on purpose/);
    });
  }

  test('an error that is not a planrun error is transient "unclassified"', async () => {
    const { outcome } = await runJob(pool, 'throw-plain-error', null);
    assertFailed(outcome, 'transient', 'unclassified', /a plain Error, not a planrun error/);
  });

  test('a job type the worker does not have is permanent "unknown_job_type"', async () => {
    const { outcome } = await runJob(pool, 'no-such-type', {});
    assertFailed(outcome, 'permanent', 'unknown_job_type', /"no-such-type".*sleep, checksum, transcode/);
  });

  test('invalid input for a shipped job type is permanent "invalid_input"', async () => {
    const { outcome } = await runJob(pool, 'sleep', { ms: -1 });
    assertFailed(outcome, 'permanent', 'invalid_input', /ms must be a number >= 0/);
  });

  test('input that is not plain JSON is refused before it reaches a process', async () => {
    const { outcome } = await runJob(pool, 'whoami', { at: new Date() });
    assertFailed(outcome, 'permanent', 'invalid_input', /input\.at is a Date/);
  });

  test('deep input (issue 18) never costs a process or a slot: each run ends, and the same processes run normal jobs after', async () => {
    // Both tasks are made first, then handed over in the same tick, so each takes a process of its own.
    const pidsOfTwoJobsAtOnce = async () => {
      const tasks = await Promise.all([task('whoami', null), task('whoami', null)]);
      const outcomes = await Promise.all(tasks.map((runTask) => pool.run(runTask, { onProgress: () => {} })));
      return new Set(outcomes.map((outcome) => (outcome.ok ? (outcome.result.data as { pid: number }).pid : outcome.error.message)));
    };
    const before = await pidsOfTwoJobsAtOnce();
    assert.equal(before.size, 2);
    for (const levels of [1_000, 3_000, 4_000, 4_150, 4_180, 10_000, 100_000]) {
      const { outcome } = await runJob(pool, 'whoami', nestedLists(levels));
      // Shallow enough to serialise, it runs; deeper, it cannot be handed over and fails
      // once, as Permanent invalid_input. Either way the run ends.
      if (!outcome.ok) assertFailed(outcome, 'permanent', 'invalid_input', /could not be handed to its job process: Maximum call stack/);
      if (levels >= 10_000) assert.equal(outcome.ok, false, `${levels} levels cannot be serialised`);
    }
    assert.deepEqual(await pidsOfTwoJobsAtOnce(), before, 'both slots work, on the processes they had');
  });

  const badResults: Array<[string, RegExp]> = [
    ['not-an-object', /returned the number 42/],
    ['unknown-property', /unknown properties "output"/],
    ['outputs-not-strings', /outputs is a list/],
    ['date-in-data', /data\.when is a Date/],
    ['bigint-in-data', /data\.big is the bigint 1n/],
    ['cycle-in-data', /data\.self refers back/],
  ];
  for (const [kind, message] of badResults) {
    test(`a result that cannot be stored faithfully is permanent "invalid_result" (${kind})`, async () => {
      const { outcome } = await runJob(pool, 'return-bad-result', kind);
      assertFailed(outcome, 'permanent', 'invalid_result', message);
    });
  }

  test('outputs must be regular files inside the scratch folder', async () => {
    const outside = path.join(scratchRoot, 'outside.txt');
    await writeFile(outside, 'not yours');
    const cases: Array<[string, (dir: string) => Promise<void>, RegExp]> = [
      ['missing.bin', async () => {}, /does not exist/],
      ['../outside.txt', async () => {}, /points outside the scratch folder/],
      [outside, async () => {}, /is an absolute path/],
      ['folder', (dir) => mkdir(path.join(dir, 'folder')), /is a directory/],
      ['link.txt', (dir) => symlink(outside, path.join(dir, 'link.txt')), /is a symbolic link/],
    ];
    for (const [output, prepare, message] of cases) {
      const runTask = await task('return-outputs', [output]);
      await prepare(runTask.scratchDir);
      const outcome = await pool.run(runTask, { onProgress: () => {} });
      assertFailed(outcome, 'permanent', 'invalid_output', message);
      assert.ok(!outcome.ok && outcome.error.message.includes(JSON.stringify(output)), 'the error names the output');
    }
  });

  test('runs beyond the pool size are refused, not queued', async () => {
    const running = [runJob(pool, 'sleep', { ms: 300, steps: 1 }), runJob(pool, 'sleep', { ms: 300, steps: 1 })];
    await delay(50);
    await assert.rejects(runJob(pool, 'whoami', null), /all 2 job processes are busy/);
    for (const { outcome } of await Promise.all(running)) assert.ok(outcome.ok);
  });
});

describe('ProcessPool when a job process dies', () => {
  let pool: ProcessPool;
  before(async () => {
    pool = newPool({ maxOldSpaceMb: 32 });
    await pool.ready();
  });
  after(() => pool.close());

  async function assertReplaced(before: number): Promise<void> {
    const pid = await pidOfNextJob(pool);
    assert.notEqual(pid, before, 'the dead process was replaced');
    assert.equal(await isAlive(before), false);
  }

  test('an uncaught exception in a timer is transient "child_crashed" and the process is replaced', async () => {
    const pid = await pidOfNextJob(pool);
    const { outcome } = await runJob(pool, 'sleep', { ms: 0, fail: 'crash' });
    assertFailed(outcome, 'transient', 'child_crashed', /uncaught exception: Error: sleep failed on purpose.*exited with code 1/);
    await assertReplaced(pid);
  });

  test('process.exit in a job is transient "child_crashed" naming the exit code', async () => {
    const pid = await pidOfNextJob(pool);
    const { outcome } = await runJob(pool, 'exit', null);
    assertFailed(outcome, 'transient', 'child_crashed', /exited with code 3/);
    await assertReplaced(pid);
  });

  test('a process killed by a signal is transient "child_killed" naming the signal', async () => {
    const pid = await pidOfNextJob(pool);
    const { outcome } = await runJob(pool, 'kill-itself', null);
    assertFailed(outcome, 'transient', 'child_killed', /killed by SIGKILL/);
    await assertReplaced(pid);
  });

  test('a job crashing in a process that has only just started is a crash, not a broken pool', async () => {
    const fresh = newPool();
    try {
      const { outcome } = await runJob(fresh, 'exit', null);
      assertFailed(outcome, 'transient', 'child_crashed', /exited with code 3/);
      assert.ok(await pidOfNextJob(fresh));
    } finally {
      await fresh.close();
    }
  });

  test('a job that outgrows maxOldSpaceMb is transient "out_of_memory"', async () => {
    const pid = await pidOfNextJob(pool);
    const { outcome } = await runJob(pool, 'allocate-forever', null);
    assertFailed(outcome, 'transient', 'out_of_memory', /heap limit 32 MB/);
    await assertReplaced(pid);
  });
});

describe('ProcessPool and the scratch reserve', () => {
  const MiB = 1024 * 1024;
  let pool: ProcessPool;
  before(async () => {
    pool = newPool();
    await pool.ready();
  });
  after(() => pool.close());

  async function runFiller(input: { mb: number; hang?: boolean }, reserveBytes: number, before?: (scratchDir: string) => Promise<void>) {
    const runTask = { ...(await task('fill-scratch', input)), scratchReserveBytes: reserveBytes };
    await before?.(runTask.scratchDir);
    return pool.run(runTask, { onProgress: () => {} });
  }

  test('a job that writes past its reserve and keeps running is stopped: Permanent resource_limit, and its process replaced', async () => {
    const pid = await pidOfNextJob(pool);
    const outcome = await runFiller({ mb: 8, hang: true }, MiB);
    assertFailed(outcome, 'permanent', 'resource_limit', /wrote \d+ bytes into its scratch folder, over its reserve of 1048576 bytes/);
    assert.ok(await waitUntilDead(pid, 10_000), 'the process that ran it is gone');
    assert.notEqual(await pidOfNextJob(pool), pid, 'a fresh process runs the next job');
  });

  test('a job that returns after writing past its reserve fails all the same', async () => {
    assertFailed(await runFiller({ mb: 3 }, MiB), 'permanent', 'resource_limit', /over its reserve of 1048576 bytes/);
  });

  test('what the worker put in the scratch folder before the run (its inputs) does not count against the reserve', async () => {
    const outcome = await runFiller({ mb: 1 }, MiB, (scratchDir) => writeFile(path.join(scratchDir, 'input.bin'), Buffer.alloc(4 * MiB)));
    assert.ok(outcome.ok, JSON.stringify(outcome));
  });

  test('a folder the worker says it has just made empty is not measured at the start: whatever is there counts', async () => {
    const runTask = { ...(await task('fill-scratch', { mb: 1 })), scratchReserveBytes: 2 * MiB, scratchStartBytes: 0 };
    await writeFile(path.join(runTask.scratchDir, 'left.bin'), Buffer.alloc(2 * MiB));
    assertFailed(await pool.run(runTask, { onProgress: () => {} }), 'permanent', 'resource_limit', /over its reserve of 2097152 bytes/);
  });

  test('without a reserve in the task the scratch folder is not watched', async () => {
    const { outcome } = await runJob(pool, 'fill-scratch', { mb: 3 });
    assert.ok(outcome.ok, JSON.stringify(outcome));
  });
});

describe('ProcessPool aborting jobs', () => {
  let pool: ProcessPool;
  before(async () => {
    pool = newPool();
    await pool.ready();
  });
  after(() => pool.close());

  test('a job that honours the signal ends "aborted" at once and its process is kept', async () => {
    const pid = await pidOfNextJob(pool);
    const started = Date.now();
    const { outcome } = await runJob(pool, 'sleep', { ms: 5000, steps: 2 }, { signal: AbortSignal.timeout(100) });
    assertFailed(outcome, 'transient', 'aborted', /the worker aborted the job/);
    assert.ok(Date.now() - started < 2500, `took ${Date.now() - started} ms, as if it slept on`);
    assert.equal(await pidOfNextJob(pool), pid);
  });

  test('a job that ignores the signal is killed after the grace period and its process replaced', async () => {
    const pid = await pidOfNextJob(pool);
    const started = Date.now();
    const { outcome } = await runJob(pool, 'sleep', { ms: 0, fail: 'hang' }, { signal: AbortSignal.timeout(100) });
    const tookMs = Date.now() - started;
    assertFailed(outcome, 'transient', 'aborted', new RegExp(`did not stop within ${GRACE_MS} ms`));
    assert.ok(tookMs >= 100 + GRACE_MS - 10, `killed after ${tookMs} ms, before the grace period was over`);
    const next = await pidOfNextJob(pool);
    assert.notEqual(next, pid);
    assert.equal(await isAlive(pid), false);
  });

  test('a job that returns normally after the abort is reported as it returned', async () => {
    const { outcome } = await runJob(pool, 'finish-after-abort', null, { signal: AbortSignal.timeout(50) });
    assert.deepEqual(outcome, { ok: true, result: { data: 'finished anyway' } });
  });

  test('a signal that fired before the run means the job does not start', async () => {
    const { outcome, progress } = await runJob(pool, 'sleep', { ms: 0 }, { signal: AbortSignal.abort() });
    assertFailed(outcome, 'transient', 'aborted', /before it started/);
    assert.deepEqual(progress, []);
  });
});

describe('ProcessPool lifecycle', () => {
  test('job modules that do not load make ready() reject and every run fatal', async () => {
    const pool = newPool({ jobModules: ['data:text/javascript,export default 5'] });
    try {
      await assert.rejects(pool.ready(), /must default-export a list of job types .*its default export is the number 5/);
      const { outcome } = await runJob(pool, 'sleep', { ms: 0 });
      assertFailed(outcome, 'fatal', 'job_modules_failed', /the number 5/);
    } finally {
      await pool.close();
    }
  });

  test('nodeFlags reach the node of every job process', async () => {
    const pool = newPool({ nodeFlags: ['--stack-size=900'] });
    try {
      await pool.ready();
      const pid = await pidOfNextJob(pool);
      assert.ok((await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0').includes('--stack-size=900'));
    } finally {
      await pool.close();
    }
  });

  test('close() kills the job processes, ends running jobs "pool_closed" and refuses new runs', async () => {
    const pool = newPool({ size: 2 });
    const [first, second] = await Promise.all([pidOfNextJob(pool), pidOfNextJob(pool)]);
    assert.notEqual(first, second);
    const running = runJob(pool, 'sleep', { ms: 10_000, fail: 'hang' });
    await delay(50);
    await pool.close();
    assertFailed((await running).outcome, 'transient', 'pool_closed');
    assert.equal(await isAlive(first), false);
    assert.equal(await isAlive(second), false);
    await assert.rejects(runJob(pool, 'whoami', null), /the pool is closed/);
  });

  test('a job process does not outlive a parent killed with SIGKILL', async () => {
    const parent = spawn(process.execPath, [ORPHANING_PARENT], { stdio: ['ignore', 'pipe', 'inherit'] });
    let childPid: number | undefined;
    try {
      const [line] = (await once(createInterface({ input: parent.stdout }), 'line')) as [string];
      childPid = Number(line);
      assert.ok(Number.isInteger(childPid) && childPid !== parent.pid, `expected the job process's pid, got ${line}`);
      assert.equal(await isAlive(childPid), true, 'the job process was running');
      parent.kill('SIGKILL');
      await once(parent, 'exit');
      assert.equal(await waitUntilDead(childPid, 2000), true, `job process ${childPid} still runs 2 s after its parent died`);
    } finally {
      parent.kill('SIGKILL');
      // Should the test fail, leave no orphan behind.
      if (childPid !== undefined && (await isAlive(childPid))) process.kill(childPid, 'SIGKILL');
    }
  });
});
