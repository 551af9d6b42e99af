import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { JobContext, JobRunResult } from '../worker/runner/job-type.js';
import { checksum } from './checksum.js';
import jobTypes from './index.js';
import { sleep } from './sleep.js';

let scratchDir: string;
before(async () => {
  scratchDir = await mkdtemp(path.join(tmpdir(), 'planrun-job-types-test-'));
});
after(() => rm(scratchDir, { recursive: true, force: true }));

interface Reported {
  fraction: number;
  message: string | undefined;
}

/** Runs a job type in this process, the way a job process would, minus the throttle. */
async function runDirectly(
  run: (ctx: JobContext) => Promise<JobRunResult> | JobRunResult,
  input: unknown,
  signal = new AbortController().signal,
): Promise<{ result: JobRunResult; reported: Reported[] }> {
  const reported: Reported[] = [];
  const ctx: JobContext = {
    input,
    scratchDir,
    signal,
    jobId: 'job-1',
    attempt: 1,
    tenant: 'acme',
    log: () => undefined,
    progress: (fraction, message) => void reported.push({ fraction, message }),
  };
  return { result: await run(ctx), reported };
}

test('the shipped list holds sleep, checksum and transcode', () => {
  assert.deepEqual(
    jobTypes.map((jobType) => jobType.name),
    ['sleep', 'checksum', 'transcode'],
  );
});

describe('sleep', () => {
  test('sleeps ms in all, reporting progress after each step', async () => {
    const started = Date.now();
    const { result, reported } = await runDirectly(sleep.run, { ms: 120, steps: 4 });
    assert.ok(Date.now() - started >= 115, `slept ${Date.now() - started} ms`);
    assert.deepEqual(result, { data: { sleptMs: 120, steps: 4 } });
    assert.deepEqual(reported, [
      { fraction: 0.25, message: 'step 1 of 4' },
      { fraction: 0.5, message: 'step 2 of 4' },
      { fraction: 0.75, message: 'step 3 of 4' },
      { fraction: 1, message: 'step 4 of 4' },
    ]);
  });

  test('takes ten steps unless told otherwise', async () => {
    const { result, reported } = await runDirectly(sleep.run, { ms: 0 });
    assert.deepEqual(result, { data: { sleptMs: 0, steps: 10 } });
    assert.equal(reported.length, 10);
  });

  test('writes an output file of outputBytes bytes', async () => {
    const { result } = await runDirectly(sleep.run, { ms: 0, steps: 1, outputBytes: 200_000 });
    assert.deepEqual(result.outputs, ['sleep-output.bin']);
    assert.equal((await stat(path.join(scratchDir, 'sleep-output.bin'))).size, 200_000);
  });

  test('fails with the requested class and code, after writing its output', async () => {
    for (const fail of ['permanent', 'transient', 'fatal']) {
      await rm(path.join(scratchDir, 'sleep-output.bin'), { force: true });
      await assert.rejects(runDirectly(sleep.run, { ms: 0, outputBytes: 1, fail }), { errorClass: fail, code: `requested_${fail}` });
      assert.equal((await stat(path.join(scratchDir, 'sleep-output.bin'))).size, 1);
    }
  });

  test('stops at once when aborted, throwing the signal’s reason', async () => {
    const controller = new AbortController();
    const reason = new Error('stop now');
    setTimeout(() => controller.abort(reason), 30);
    const started = Date.now();
    await assert.rejects(runDirectly(sleep.run, { ms: 10_000, steps: 2 }, controller.signal), (error) => error === reason);
    assert.ok(Date.now() - started < 1000, `took ${Date.now() - started} ms to stop`);
  });

  test('refuses bad input as permanent "invalid_input"', async () => {
    const inputs = [null, [], { ms: '5' }, { ms: 5, steps: 0 }, { ms: 5, steps: 1.5 }, { ms: 5, outputBytes: -1 }, { ms: 5, fail: 'explode' }];
    for (const input of inputs) {
      await assert.rejects(runDirectly(sleep.run, input), { errorClass: 'permanent', code: 'invalid_input' }, JSON.stringify(input));
    }
  });
});

describe('checksum', () => {
  const helloSha256 = '2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824';

  test('hashes text as UTF-8 and writes the digest like sha256sum', async () => {
    const { result } = await runDirectly(checksum.run, { text: 'hello' });
    assert.deepEqual(result, { data: { sha256: helloSha256, size: 5 }, outputs: ['checksum.sha256'] });
    assert.equal(await readFile(path.join(scratchDir, 'checksum.sha256'), 'utf8'), `${helloSha256}  -\n`);
  });

  test('hashes base64 bytes', async () => {
    const { result } = await runDirectly(checksum.run, { bytes: Buffer.from('hello').toString('base64') });
    assert.deepEqual(result.data, { sha256: helloSha256, size: 5 });
  });

  test('refuses anything else as permanent "invalid_input"', async () => {
    for (const input of [{}, { text: 5 }, { bytes: 'not base64!' }, { text: 'a', bytes: 'YQ==' }]) {
      await assert.rejects(runDirectly(checksum.run, input), { errorClass: 'permanent', code: 'invalid_input' }, JSON.stringify(input));
    }
  });
});
