/**
 * Issue 13 section 2: the examples of job types in other languages run as shipped.
 * `planrun up --jobs examples/python/jobs.json --jobs examples/shell/jobs.yaml`, under
 * sandbox none and bwrap, runs the Python job and the shell job to `finished`, with the
 * result data and the output each wrote stored; input the job refuses (exit 65) fails the
 * job Permanent at once, with the job's own words.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { packageRoot } from '../../test/testing/package-root.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { runCli, startUp, type UpProcess } from '../../test/testing/up-process.js';

const PYTHON_JOBS = join(packageRoot, 'examples', 'python', 'jobs.json');
const SHELL_JOBS = join(packageRoot, 'examples', 'shell', 'jobs.yaml');

interface JobStatus {
  state: string;
  result?: { data?: unknown; outputs?: Record<string, string> };
  error?: { class: string; code: string; message: string };
}

for (const sandbox of ['none', 'bwrap']) {
  describe(`the command job examples on planrun up, sandbox ${sandbox}`, () => {
    const upDir = tempDir('planrun-command-examples-');
    let up: UpProcess;

    before(async () => {
      up = await startUp(upDir.path, ['--jobs', PYTHON_JOBS, '--jobs', SHELL_JOBS, '--sandbox', sandbox], process.env);
    });
    after(async () => {
      await up?.stop();
      upDir.remove();
    });

    async function submit(type: string, input: unknown): Promise<JobStatus> {
      const client = ['--url', up.url, '--key', up.key];
      const submitted = await runCli(['submit', type, '--input', JSON.stringify(input), '--wait', ...client], upDir.path);
      const id = submitted.stdout.split('\n')[0]!.trim();
      const status = await runCli(['status', id, '--json', ...client], upDir.path);
      assert.equal(status.status, 0, status.stderr + submitted.stderr);
      return JSON.parse(status.stdout) as JobStatus;
    }

    function output(job: JobStatus, name: string): string {
      const location = job.result?.outputs?.[name];
      assert.ok(location, `the job stored ${name}: ${JSON.stringify(job)}`);
      return readFileSync(location.startsWith('file://') ? fileURLToPath(location) : location, 'utf8');
    }

    it('runs the Python example: its result data and its listed output are stored', async () => {
      const job = await submit('upscale', { rows: ['ab', 'cd'] });
      assert.equal(job.state, 'finished', JSON.stringify(job));
      assert.deepEqual(job.result?.data, { width: 4, height: 4 });
      assert.equal(output(job, 'upscaled.txt'), 'aabb\naabb\nccdd\nccdd\n');
    });

    it('runs the shell example: the file it left in outputs/ is stored', async () => {
      const job = await submit('count-words', { text: 'one two three four' });
      assert.equal(job.state, 'finished', JSON.stringify(job));
      assert.equal(output(job, 'outputs/count.txt'), '4\n');
    });

    it('input the Python example refuses (exit 65) fails the job Permanent, with what it printed', async () => {
      const job = await submit('upscale', { rows: 'not a list' });
      assert.equal(job.state, 'failed', JSON.stringify(job));
      assert.equal(job.error?.class, 'permanent');
      assert.equal(job.error?.code, 'data_error');
      assert.match(job.error?.message ?? '', /input\.rows must be a list of strings/);
    });
  });
}
