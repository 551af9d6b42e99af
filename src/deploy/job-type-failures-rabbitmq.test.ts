/**
 * Issue 19, "Job types", through `planrun orchestrator` and `planrun worker` as an
 * operator runs them (RabbitMQ; SQLite and PostgreSQL ledgers), with a TypeScript job
 * module the worker loads directly:
 * - a job type whose `requires` no worker meets fails at once naming the capability it
 *   lacks, not only "no worker offers job type ...";
 * - a plain Error thrown by job code keeps its stack (bounded, pointing at the .ts line)
 *   with the attempt's error, where GET /v1/jobs/:id shows it.
 */
import assert from 'node:assert/strict';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Client } from '../client/client.js';
import { MAX_ERROR_STACK_LENGTH } from '../core/errors.js';
import { packageRoot } from '../../test/testing/package-root.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { waitFor } from '../../test/testing/wait.js';
import { startProcessPair, type ProcessPair } from '../../test/testing/process-pair.js';

const jobsSource = [
  "import { defineJobType } from 'planrun';", //                                      1
  'interface Frame {', //                                                             2
  '  width: number;', //                                                              3
  '}', //                                                                             4
  'function widthOf(frame: Frame | undefined): number {', //                           5
  '  return frame!.width;', //                                                        6
  '}', //                                                                             7
  'export default [', //                                                              8
  "  defineJobType({ name: 'thumbnail', requires: ['imagemagick'], run: () => ({}) }),",
  "  defineJobType({ name: 'buggy', run: () => ({ data: widthOf(undefined) }) }),",
  "  defineJobType({ name: 'deep', run: () => { throw new Error('m'.repeat(20_000)); } }),",
  '];',
].join('\n');

for (const ledger of ['sqlite', 'postgres'] as const) {
  describe(`job type failures told through planrun orchestrator and worker (RabbitMQ, ${ledger === 'sqlite' ? 'SQLite' : 'PostgreSQL'})`, () => {
    const dir = tempDir('planrun-job-type-failures-');
    let pair: ProcessPair;
    let client: Client;

    before(async () => {
      // The module imports 'planrun' by name, installed beside it as a user's would be.
      mkdirSync(join(dir.path, 'node_modules'));
      symlinkSync(packageRoot, join(dir.path, 'node_modules', 'planrun'), 'dir');
      const jobsModule = join(dir.path, 'buggy-jobs.ts');
      writeFileSync(jobsModule, jobsSource);
      pair = await startProcessPair({
        dir: dir.path,
        ledger,
        workerArgs: ['--jobs', jobsModule, '--slots', '1'],
        jobTypes: ['sleep', 'checksum', 'transcode', 'thumbnail', 'buggy', 'deep'],
      });
      client = pair.client;
    });

    after(async () => {
      await pair.stop();
      dir.remove();
    });

    it('the worker holds back the type it lacks a capability for, and says so to the fleet', async () => {
      const worker = await waitFor('the worker in the fleet', async () => (await client.fleet()).workers[0]);
      assert.deepEqual(worker.heldBack, [{ type: 'thumbnail', missing: ['imagemagick'] }]);
      assert.ok(worker.jobTypes.includes('buggy') && !worker.jobTypes.includes('thumbnail'), worker.jobTypes.join(', '));
    });

    it('a job of that type fails at once, naming the capability missing', async () => {
      const submitted = await client.submit('thumbnail', { url: 'https://example.com/a.jpg' });
      assert.deepEqual([submitted.state, submitted.reason, submitted.error?.code], ['failed', 'unroutable', 'unroutable']);
      assert.equal(
        submitted.error?.message,
        'no worker of the fleet offers job type "thumbnail": the workers that have it lack capabilities it requires: missing "imagemagick"',
      );
    });

    it("a plain Error's stack is kept with the attempt, naming the .ts line, and GET /v1/jobs/:id shows it", async () => {
      const submitted = await client.submit('buggy', {}, { maxAttempts: 1 });
      const job = await client.wait(submitted.id, { timeoutMs: 20_000 });
      assert.equal(job.state, 'failed');
      const [attempt] = job.attempts;
      assert.deepEqual([attempt?.error?.class, attempt?.error?.code], ['transient', 'unclassified']);
      assert.match(attempt?.error?.message ?? '', /Cannot read properties of undefined \(reading 'width'\)/);
      assert.match(attempt?.error?.stack ?? '', /^TypeError: Cannot read properties of undefined[^\n]*\n\s+at widthOf \([^)]*buggy-jobs\.ts:6:\d+\)/);
    });

    it('a stack is kept to its bound', async () => {
      const submitted = await client.submit('deep', {}, { maxAttempts: 1 });
      const job = await client.wait(submitted.id, { timeoutMs: 20_000 });
      const stack = job.attempts[0]?.error?.stack ?? '';
      assert.equal(stack.length, MAX_ERROR_STACK_LENGTH);
      assert.match(stack, /^Error: m{1000}/);
      assert.equal(job.attempts[0]?.error?.message.length, 20_000);
    });
  });
}
