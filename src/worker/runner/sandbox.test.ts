import assert from 'node:assert/strict';
import { chmod, mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { resolveJobUser } from '../../cli/sandbox-options.js';
import type { RunnerLogger } from './logger.js';
import { ProcessPool, type RunOutcome, type RunTask } from './pool.js';
import { checkSandbox, wrapCommand, type SandboxPolicy } from './sandbox.js';
import { createScratch } from './scratch.js';

const HOSTILE_JOBS = new URL('../../../test/worker/runner/fixtures/hostile-jobs.js', import.meta.url).href;
const GRACE_MS = 200;

let scratchRoot: string;
let jobCounter = 0;

before(async () => {
  scratchRoot = await mkdtemp(path.join(tmpdir(), 'planrun-sandbox-test-'));
  // Another user's job must enter its own folder in here.
  await chmod(scratchRoot, 0o711);
  process.env.HOSTILE_DECLARED = 'declared-value';
  process.env.HOSTILE_OPERATOR = 'operator-value';
  process.env.HOSTILE_PLANTED_SECRET = 'planted-value';
  process.env.PLANRUN_FLEET_KEY = 'fleet-key-value';
});
after(async () => {
  await rm(scratchRoot, { recursive: true, force: true });
  for (const name of ['HOSTILE_DECLARED', 'HOSTILE_OPERATOR', 'HOSTILE_PLANTED_SECRET', 'PLANRUN_FLEET_KEY']) delete process.env[name];
});

function quietLogger(): RunnerLogger {
  const ignore = () => undefined;
  return { debug: ignore, info: ignore, warn: ignore, error: ignore };
}

function newPool(sandbox?: SandboxPolicy, options: Partial<ConstructorParameters<typeof ProcessPool>[0]> = {}): ProcessPool {
  return new ProcessPool({
    jobModules: [HOSTILE_JOBS],
    size: 2,
    abortGraceMs: GRACE_MS,
    logger: quietLogger(),
    jobEnv: ['HOSTILE_OPERATOR'],
    ...(sandbox ? { sandbox } : {}),
    ...options,
  });
}

async function run(pool: ProcessPool, type: string, input: unknown, extra: Partial<RunTask> = {}): Promise<{ outcome: RunOutcome; scratchDir: string }> {
  const jobId = `job-${++jobCounter}`;
  const scratchDir = await createScratch(scratchRoot, jobId, 1);
  const outcome = await pool.run({ jobId, attempt: 1, tenant: 'acme', type, input, scratchDir, ...extra }, { onProgress: () => undefined });
  return { outcome, scratchDir };
}

function dataOf(outcome: RunOutcome): Record<string, unknown> {
  assert.ok(outcome.ok, `the job failed: ${JSON.stringify(outcome)}`);
  return outcome.result.data as Record<string, unknown>;
}

function assertFailed(outcome: RunOutcome, errorClass: string, code: string): void {
  assert.equal(outcome.ok, false, `expected ${errorClass} ${code}, got ${JSON.stringify(outcome)}`);
  if (outcome.ok) return;
  assert.deepEqual([outcome.error.class, outcome.error.code], [errorClass, code], outcome.error.message);
}

const nobody = resolveJobUser('nobody');
const policies: [string, SandboxPolicy | undefined][] = [
  ['none', undefined],
  ['job-user', { kind: 'none', jobUser: nobody }],
  ['bwrap', { kind: 'bwrap' }],
  ['bwrap + job-user', { kind: 'bwrap', jobUser: nobody }],
];

for (const [label, policy] of policies) {
  describe(`job processes with sandbox ${label}`, () => {
    let pool: ProcessPool;
    before(async () => {
      pool = newPool(policy);
      await pool.ready();
    });
    after(() => pool.close());

    test('a job gets the allowlisted environment: PATH, HOME and TMPDIR in its scratch folder, its declared names, the operator’s, nothing else', async () => {
      for (let round = 0; round < 2; round++) {
        const { outcome, scratchDir } = await run(pool, 'report-env', null);
        const { env, cwd, uid } = dataOf(outcome) as { env: Record<string, string>; cwd: string; uid: number };
        assert.equal(env.HOME, scratchDir);
        assert.equal(env.TMPDIR, scratchDir);
        assert.equal(cwd, scratchDir);
        assert.equal(env.HOSTILE_DECLARED, 'declared-value');
        assert.equal(env.HOSTILE_OPERATOR, 'operator-value');
        assert.equal(env.PATH, process.env.PATH);
        const unexpected = Object.keys(env).filter((name) => !['PATH', 'LANG', 'TZ', 'HOME', 'TMPDIR', 'HOSTILE_DECLARED', 'HOSTILE_OPERATOR'].includes(name));
        assert.deepEqual(unexpected, [], 'no other variable, PLANRUN_FLEET_KEY and HOSTILE_PLANTED_SECRET least of all');
        assert.equal(uid, policy?.jobUser ? nobody.uid : process.getuid?.());
      }
    });

    test('a job past its type’s timeoutSeconds that ignores its abort signal is killed after the grace: Transient "timeout"', async () => {
      const started = Date.now();
      const { outcome } = await run(pool, 'hostile-hang', null);
      assertFailed(outcome, 'transient', 'timeout');
      assert.ok(Date.now() - started >= 1000, 'not before its deadline');
      // The slot is free again: the next job runs.
      dataOf((await run(pool, 'report-env', null)).outcome);
    });

    test('a fork bomb ends its job as Permanent "resource_limit"', async () => {
      const { outcome } = await run(pool, 'hostile-fork', { count: 200 });
      assertFailed(outcome, 'permanent', 'resource_limit');
    });

    test('a job holding more memory than its limit ends Permanent "resource_limit"', async () => {
      const { outcome } = await run(pool, 'hostile-memory', { mb: 256 });
      assertFailed(outcome, 'permanent', 'resource_limit');
      // Under the limit it runs.
      assert.deepEqual(dataOf((await run(pool, 'hostile-memory', { mb: 32 })).outcome), { heldMb: 32 });
    });

    test(`the network is there for a type that declares network: true${policy?.kind === 'bwrap' ? ', and only for it' : ''}`, async () => {
      const port = 5672;
      assert.equal((dataOf((await run(pool, 'network-probe', { port })).outcome) as { succeeded: boolean }).succeeded, true);
      const closed = dataOf((await run(pool, 'no-network-probe', { port })).outcome) as { succeeded: boolean };
      assert.equal(closed.succeeded, policy?.kind !== 'bwrap');
    });

    if (policy?.jobUser) {
      test('the scratch folder belongs to the job user', async () => {
        const { outcome, scratchDir } = await run(pool, 'report-env', null);
        dataOf(outcome);
        assert.equal((await stat(scratchDir)).uid, nobody.uid);
      });
    }
  });
}

describe('run timeouts', () => {
  let pool: ProcessPool;
  before(async () => {
    pool = newPool(undefined, { jobTimeoutMs: 300 });
    await pool.ready();
  });
  after(() => pool.close());

  test('a type that declares timeouts Permanent ends Permanent "timeout"', async () => {
    assertFailed((await run(pool, 'hostile-hang-permanent', null)).outcome, 'permanent', 'timeout');
  });

  test('the worker’s default applies to a type that declares none', async () => {
    assertFailed((await run(pool, 'hang-without-timeout', null)).outcome, 'transient', 'timeout');
  });

  test('the submission’s timeoutSeconds wins over the type’s and the worker’s', async () => {
    const started = Date.now();
    const { outcome } = await run(pool, 'hostile-hang', null, { timeoutSeconds: 2 });
    assertFailed(outcome, 'transient', 'timeout');
    assert.ok(Date.now() - started >= 2000, `ended after ${Date.now() - started} ms, before the submission's 2 s`);
  });
});

describe('refusals', () => {
  test('the operator cannot hand planrun’s own settings or credentials to jobs', () => {
    for (const name of ['PLANRUN_FLEET_KEY', 'PLANRUN_AMQP_URL', 'AWS_SECRET_ACCESS_KEY', 'BROKER_AMQP_URL', 'HOME']) {
      assert.throws(() => newPool(undefined, { jobEnv: [name] }), { message: new RegExp(`${name} is never handed to job code`) });
    }
  });

  test('a job user that cannot reach the scratch root is known at ready(), before any job', async () => {
    const closedRoot = await mkdtemp(path.join(tmpdir(), 'planrun-closed-scratch-'));
    const pool = newPool({ kind: 'none', jobUser: nobody }, { scratchRoot: closedRoot });
    try {
      await assert.rejects(
        pool.ready(),
        /job user nobody \(65534\) cannot write in its scratch folders under .*planrun-closed-scratch-.*: every folder above them must be enterable by that user/,
      );
    } finally {
      await pool.close();
      await rm(closedRoot, { recursive: true, force: true });
    }
  });

  test('a missing bubblewrap is said clearly, before any job', () => {
    assert.throws(() => checkSandbox({ kind: 'bwrap', bwrapPath: '/nonexistent/bwrap' }), {
      message: '--sandbox bwrap needs bubblewrap, and /nonexistent/bwrap is not there (Debian/Ubuntu: apt-get install bubblewrap)',
    });
  });

  test('the bwrap argv keeps the network only when asked, binds the scratch folder writable and nothing else', () => {
    const command = { argv: ['/usr/bin/node', 'x.js'], scratchDir: '/tmp/s/job.1-a', readable: ['/usr/bin/node'], env: {}, network: false };
    const closed = wrapCommand({ kind: 'bwrap', hiddenPaths: ['/tmp/s'] }, command);
    assert.equal(closed.file, '/usr/bin/bwrap');
    for (const flag of ['--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-net', '--die-with-parent', '--new-session'])
      assert.ok(closed.args.includes(flag), flag);
    const writable = closed.args.flatMap((arg, index) => (arg === '--bind' ? [closed.args[index + 1]] : []));
    assert.deepEqual(writable, ['/tmp/s/job.1-a']);
    assert.deepEqual(closed.args.slice(-3), ['--', '/usr/bin/node', 'x.js']);
    assert.ok(!wrapCommand({ kind: 'bwrap' }, { ...command, network: true }).args.includes('--unshare-net'));
    const limited = wrapCommand({ kind: 'none', jobUser: nobody }, { ...command, limits: { dataBytes: 1 << 30, processes: 50 } });
    assert.deepEqual([limited.file, ...limited.args], ['/usr/bin/prlimit', `--data=${1 << 30}`, '--nproc=50', '--', '/usr/bin/node', 'x.js']);
    assert.deepEqual([limited.uid, limited.gid], [nobody.uid, nobody.gid]);
  });
});

describe('limits held by setrlimit where there is no cgroup for them (limitsBy: rlimit)', () => {
  const nobodyUser = resolveJobUser('nobody');

  test('ready() refuses a job type declaring a process limit when no job user makes RLIMIT_NPROC mean anything', async () => {
    const pool = newPool(undefined, { limitsBy: 'rlimit' });
    try {
      await assert.rejects(pool.ready(), /job type "hostile-fork": limits\.processes cannot be enforced on this machine: .*RLIMIT_NPROC needs --job-user/);
      assert.match(
        pool.describeLimits(),
        /^memory: RLIMIT_DATA per process \(prlimit\); processes: NOT enforceable here .*; scratch reserve watched every 200 ms$/,
      );
    } finally {
      await pool.close();
    }
  });

  describe('as a job user', () => {
    const pool = newPool({ kind: 'none', jobUser: nobodyUser }, { limitsBy: 'rlimit' });
    before(() => pool.ready());
    after(() => pool.close());

    test('the worker says which mechanism holds each limit', () => {
      assert.equal(
        pool.describeLimits(),
        'memory: RLIMIT_DATA per process (prlimit); processes: RLIMIT_NPROC of the job user, all its jobs together (prlimit); scratch reserve watched every 200 ms',
      );
    });

    test('a fork bomb is stopped by RLIMIT_NPROC: the fork fails inside the job', async () => {
      // The job reports the refused fork or dies of it (Transient unclassified): either way, with EAGAIN.
      const { outcome } = await run(pool, 'hostile-fork', { count: 200 });
      assert.ok(!(outcome.ok && (outcome.result.data as { started: number }).started === 200), 'it started all 200 processes');
      assert.match(JSON.stringify(outcome), /EAGAIN/);
    });

    test('a memory hog is stopped by RLIMIT_DATA: its allocation fails, and the job with it', async () => {
      const { outcome } = await run(pool, 'hostile-memory', { mb: 256 });
      assert.equal(outcome.ok, false, `it held 256 MB under a 128 MB limit: ${JSON.stringify(outcome)}`);
    });

    test('a submission’s memory limit is held the same way', async () => {
      const { outcome } = await run(pool, 'hostile-memory', { mb: 64 }, { limits: { memoryMb: 64 } });
      assert.equal(outcome.ok, false, `it held 64 MB beside Node under a 64 MB limit: ${JSON.stringify(outcome)}`);
      assert.ok(dataOf((await run(pool, 'hostile-memory', { mb: 32 })).outcome), 'within the type’s 128 MB it finishes');
    });
  });
});
