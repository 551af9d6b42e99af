import assert from 'node:assert/strict';
import { access, mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, test } from 'node:test';
import { createScratch, removeScratch } from './scratch.js';

let root: string;
beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'planrun-scratch-test-'));
});
afterEach(() => rm(root, { recursive: true, force: true }));

const exists = (target: string) =>
  access(target).then(
    () => true,
    () => false,
  );

test('each attempt gets its own empty folder <root>/<jobId>.<attempt>-<random>', async () => {
  const first = await createScratch(root, 'job-1', 1);
  const second = await createScratch(root, 'job-1', 2);
  assert.match(path.relative(root, first), /^job-1\.1-\w{6}$/);
  assert.match(path.relative(root, second), /^job-1\.2-\w{6}$/);
  assert.deepEqual(await readdir(first), []);
});

test('the same attempt again gets a fresh folder beside the leftovers of the last run', async () => {
  const crashed = await createScratch(root, 'job-1', 1);
  await writeFile(path.join(crashed, 'half-written.bin'), 'x');
  const retried = await createScratch(root, 'job-1', 1);
  assert.notEqual(retried, crashed);
  assert.deepEqual(await readdir(retried), []);
});

test('a relative root gives an absolute folder', async () => {
  const dir = await createScratch(path.relative(process.cwd(), root), 'job-1', 1);
  assert.ok(path.isAbsolute(dir));
});

test('removeScratch removes the folder with its contents, and an empty one, and nothing else', async () => {
  const first = await createScratch(root, 'job-1', 1);
  const second = await createScratch(root, 'job-1', 2);
  await mkdir(path.join(first, 'nested'));
  await writeFile(path.join(first, 'nested', 'out.bin'), 'x');
  await removeScratch(first);
  assert.equal(await exists(first), false);
  assert.equal(await exists(second), true, 'attempt 2 keeps its folder');
  await removeScratch(second);
  assert.deepEqual(await readdir(root), []);
});

test('a root that does not exist yet is made', async () => {
  const dir = await createScratch(path.join(root, 'not', 'yet'), 'job-1', 1);
  assert.match(path.relative(root, dir), /^not\/yet\/job-1\.1-\w{6}$/);
});

test('removing a folder that is already gone is fine', async () => {
  const dir = await createScratch(root, 'job-1', 1);
  await removeScratch(dir);
  await removeScratch(dir);
});

test('job ids that could leave the root and attempts below 1 are refused', async () => {
  for (const jobId of ['../escape', 'a/b', '..', '', '.hidden']) {
    await assert.rejects(createScratch(root, jobId, 1), /not safe as a folder name/, jobId);
  }
  await assert.rejects(createScratch(root, 'job-1', 0), /attempt must be a whole number >= 1/);
});
