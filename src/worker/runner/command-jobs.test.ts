/**
 * Issue 13 section 2: command job types speak docs/job-protocol.md under every sandbox:
 * input in a file and on stdin, the scratch folder as working directory, progress lines on
 * fd 3 (malformed ones ignored with a warning), a result file or an outputs/ folder,
 * sysexits exit codes to error classes, the abort signal, a missing program.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { parseProgressLine } from './command-process.js';
import type { RunnerLogger } from './logger.js';
import { ProcessPool, type RunOutcome } from './pool.js';
import { resolveJobUser } from '../../cli/sandbox-options.js';
import type { SandboxPolicy } from './sandbox.js';
import { createScratch } from './scratch.js';
import { waitFor } from '../../../test/testing/wait.js';

// One program for every behaviour, chosen by input.mode; it reads its input from stdin.
const BEHAVE_PY = `
import json, os, sys
job_input = json.load(sys.stdin)
from_file = json.load(open(os.environ["PLANRUN_INPUT_FILE"]))
mode = job_input["mode"]
if mode == "ok":
    open("made.txt", "w").write("made")
    json.dump({"data": {"cwd": os.getcwd(), "sameInFile": from_file == job_input,
                        "planrunEnv": sorted(k for k in os.environ if k.startswith("PLANRUN_")),
                        "home": os.environ["HOME"]}, "outputs": ["made.txt"]},
              open(os.environ["PLANRUN_RESULT_FILE"], "w"))
elif mode == "outputs-folder":
    os.makedirs("outputs/sub")
    open("outputs/a.txt", "w").write("a")
    open("outputs/sub/b.txt", "w").write("b")
elif mode == "progress":
    fd = os.fdopen(int(os.environ["PLANRUN_PROGRESS_FD"]), "w", buffering=1)
    for line in ["progress 0.25 first pass", "nonsense", "progress lots", "progress 1.5 over", "progress 0.5"]:
        print(line, file=fd)
elif mode == "exit":
    print("line one", file=sys.stderr)
    print("what went wrong", file=sys.stderr)
    sys.exit(job_input["code"])
elif mode == "bad-result":
    open(os.environ["PLANRUN_RESULT_FILE"], "w").write("{not json")
elif mode == "missing-output":
    json.dump({"outputs": ["nowhere.txt"]}, open(os.environ["PLANRUN_RESULT_FILE"], "w"))
`;

// In shell, which starts at once, so the signal never comes before the trap is set.
const WAIT_FOR_TERM_SH = `#!/bin/sh
trap 'echo stopping on SIGTERM >&2; exit 75' TERM
touch started
while :; do sleep 0.05; done
`;

// 50 processes against a limit of 16: bash retries a refused fork, the worker ends the job first.
const FORK_SH = `#!/bin/bash
for n in $(seq 50); do sleep 30 & done
echo '{"data": {"started": 50}}' > "$PLANRUN_RESULT_FILE"
`;

const JOBS_YAML = `
jobTypes:
  - name: behave
    command: [python3, behave.py]
  - name: wait-for-term
    command: [./wait-for-term.sh]
  - name: wait-for-term-with-timeout
    command: [./wait-for-term.sh]
    timeoutSeconds: 1
  - name: leave-running
    command: [sh, -c, 'sleep 30 & exit 0']
  - name: fork
    command: [./fork.sh]
    limits: { processes: 16 }
`;

function quietLogger(): RunnerLogger & { lines: string[] } {
  const lines: string[] = [];
  const keep = (_fields: object, message: string) => void lines.push(message);
  return { lines, debug: keep, info: keep, warn: keep, error: keep };
}

function assertFailed(outcome: RunOutcome, errorClass: string, code: string): string {
  assert.equal(outcome.ok, false, `expected ${errorClass} ${code}, got ${JSON.stringify(outcome)}`);
  if (outcome.ok) return '';
  assert.deepEqual([outcome.error.class, outcome.error.code], [errorClass, code], outcome.error.message);
  return outcome.error.message;
}

let moduleDir: string;
let scratchRoot: string;
let jobCounter = 0;

before(async () => {
  moduleDir = await mkdtemp(path.join(tmpdir(), 'planrun-command-jobs-'));
  scratchRoot = await mkdtemp(path.join(tmpdir(), 'planrun-command-scratch-'));
  await chmod(scratchRoot, 0o711);
  await chmod(moduleDir, 0o755);
  await writeFile(path.join(moduleDir, 'behave.py'), BEHAVE_PY, { mode: 0o644 });
  await writeFile(path.join(moduleDir, 'wait-for-term.sh'), WAIT_FOR_TERM_SH, { mode: 0o755 });
  await writeFile(path.join(moduleDir, 'fork.sh'), FORK_SH, { mode: 0o755 });
  await writeFile(path.join(moduleDir, 'jobs.yaml'), JOBS_YAML);
});
after(async () => {
  await rm(moduleDir, { recursive: true, force: true });
  await rm(scratchRoot, { recursive: true, force: true });
});

const nobody = resolveJobUser('nobody');
const policies: [string, SandboxPolicy][] = [
  ['none', { kind: 'none' }],
  ['job-user', { kind: 'none', jobUser: nobody }],
  ['bwrap', { kind: 'bwrap' }],
];

for (const [label, sandbox] of policies) {
  describe(`command job types with sandbox ${label}`, () => {
    let pool: ProcessPool;
    let logger: ReturnType<typeof quietLogger>;
    before(async () => {
      logger = quietLogger();
      pool = new ProcessPool({
        jobModules: [path.join(moduleDir, 'jobs.yaml')],
        size: 2,
        progressThrottleMs: 0,
        abortGraceMs: 2000,
        logger,
        sandbox,
        scratchRoot,
      });
      await pool.ready();
    });
    after(() => pool.close());

    async function run(input: unknown, type = 'behave', signal?: AbortSignal, onScratch?: (scratchDir: string) => void) {
      const jobId = `cmd-${++jobCounter}`;
      const scratchDir = await createScratch(scratchRoot, jobId, 1);
      onScratch?.(scratchDir);
      const progress: { fraction: number; message: string | undefined }[] = [];
      const outcome = await pool.run(
        { jobId, attempt: 1, tenant: 'acme', type, input, scratchDir },
        { onProgress: (fraction, message) => progress.push({ fraction, message }), ...(signal ? { signal } : {}) },
      );
      return { outcome, progress, scratchDir };
    }

    test('gets its input on stdin and in PLANRUN_INPUT_FILE, runs in its scratch folder, lists its outputs in the result file', async () => {
      const { outcome, scratchDir } = await run({ mode: 'ok', text: 'héllo' });
      assert.ok(outcome.ok, JSON.stringify(outcome));
      assert.deepEqual(outcome.result.outputs, ['made.txt']);
      assert.deepEqual(outcome.result.data, {
        cwd: scratchDir,
        sameInFile: true,
        planrunEnv: ['PLANRUN_INPUT_FILE', 'PLANRUN_PROGRESS_FD', 'PLANRUN_RESULT_FILE'],
        home: scratchDir,
      });
    });

    test('without a result file, the files under outputs/ are its outputs', async () => {
      const { outcome } = await run({ mode: 'outputs-folder' });
      assert.ok(outcome.ok, JSON.stringify(outcome));
      assert.deepEqual(outcome.result, { outputs: ['outputs/a.txt', 'outputs/sub/b.txt'] });
    });

    test('reports progress lines from fd 3, clamped; malformed lines are ignored with a warning', async () => {
      const { outcome, progress } = await run({ mode: 'progress' });
      assert.ok(outcome.ok, JSON.stringify(outcome));
      assert.deepEqual(progress, [
        { fraction: 0.25, message: 'first pass' },
        { fraction: 1, message: 'over' },
        { fraction: 0.5, message: undefined },
      ]);
      assert.equal(logger.lines.filter((line) => line.startsWith('ignored a progress line')).length >= 2, true, logger.lines.join('\n'));
    });

    for (const [code, errorClass, errorCode] of [
      [65, 'permanent', 'data_error'],
      [75, 'transient', 'temporary_failure'],
      [70, 'fatal', 'software_error'],
      [3, 'transient', 'unclassified'],
    ] as const) {
      test(`exit code ${code} fails the job ${errorClass} ${errorCode}, with the last lines of stderr`, async () => {
        const message = assertFailed((await run({ mode: 'exit', code })).outcome, errorClass, errorCode);
        assert.match(message, new RegExp(`exited with ${code}.*line one\\nwhat went wrong$`, 's'));
      });
    }

    test('a result file that is not JSON, or names an output that is not there, fails the job permanently', async () => {
      assert.match(assertFailed((await run({ mode: 'bad-result' })).outcome, 'permanent', 'invalid_result'), /is not JSON/);
      assert.match(assertFailed((await run({ mode: 'missing-output' })).outcome, 'permanent', 'invalid_output'), /does not exist/);
    });

    test('past its timeout the program gets SIGTERM, and the job ends Transient timeout', async () => {
      const { outcome } = await run({}, 'wait-for-term-with-timeout');
      assert.match(assertFailed(outcome, 'transient', 'timeout'), /past its timeout of 1 s/);
      assert.ok(logger.lines.includes('stopping on SIGTERM'), `the program saw SIGTERM: ${logger.lines.join('\n')}`);
    });

    test('its limits hold from its first instruction: a program that forks past limits.processes ends Permanent resource_limit', async () => {
      assert.match(assertFailed((await run({}, 'fork')).outcome, 'permanent', 'resource_limit'), /more than 16 processes/);
    });

    test('a process it leaves running with its pipes open does not hold the job: it ends when the program exits', async () => {
      const started = Date.now();
      const { outcome } = await run({}, 'leave-running');
      assert.ok(outcome.ok, JSON.stringify(outcome));
      assert.ok(Date.now() - started < 20_000, 'the job ended before the process it left running');
    });

    test('its abort signal is SIGTERM too: a program that stops on it ends Transient aborted', async () => {
      const controller = new AbortController();
      const abortOnceStarted = (scratchDir: string) =>
        void waitFor('the program to start', () => existsSync(path.join(scratchDir, 'started'))).then(() => controller.abort());
      const { outcome } = await run({}, 'wait-for-term', controller.signal, abortOnceStarted);
      assert.match(assertFailed(outcome, 'transient', 'aborted'), /stopped on its abort signal \(exit code 75\)/);
    });
  });
}

describe('a command job type whose program is missing', () => {
  test('stops the worker at ready(), naming the job type and the program', async () => {
    const file = path.join(moduleDir, 'missing.json');
    await writeFile(file, JSON.stringify({ jobTypes: [{ name: 'ghost', command: ['planrun-no-such-program', 'x'] }] }));
    const pool = new ProcessPool({ jobModules: [file], size: 1 });
    try {
      await assert.rejects(pool.ready(), /job type "ghost": program "planrun-no-such-program" is not in the job's PATH/);
    } finally {
      await pool.close();
    }
  });

  test('gone after the start, fails the job Fatal command_not_found', async () => {
    const program = path.join(moduleDir, 'vanishing.sh');
    await writeFile(program, '#!/bin/sh\nexit 0\n', { mode: 0o755 });
    const file = path.join(moduleDir, 'vanishing.json');
    await writeFile(file, JSON.stringify({ jobTypes: [{ name: 'vanishing', command: ['./vanishing.sh'] }] }));
    const pool = new ProcessPool({ jobModules: [file], size: 1, logger: quietLogger() });
    try {
      await pool.ready();
      await rm(program);
      const scratchDir = await createScratch(scratchRoot, 'vanishing', 1);
      const outcome = await pool.run({ jobId: 'vanishing', attempt: 1, tenant: 'acme', type: 'vanishing', input: {}, scratchDir }, { onProgress: () => {} });
      assert.match(assertFailed(outcome, 'fatal', 'command_not_found'), /vanishing\.sh is not there/);
    } finally {
      await pool.close();
    }
  });
});

describe('parseProgressLine', () => {
  test('takes "progress <fraction> [message]" and nothing else', () => {
    assert.deepEqual(parseProgressLine('progress 0.42 encoding pass 2'), { fraction: 0.42, message: 'encoding pass 2' });
    assert.deepEqual(parseProgressLine('progress -1'), { fraction: 0 });
    for (const bad of ['', 'progress', 'progress NaN', 'progress Infinity x', 'progres 0.5', '0.5', `progress 0.5 ${'x'.repeat(5000)}`]) {
      assert.equal(parseProgressLine(bad), undefined, bad);
    }
  });
});
