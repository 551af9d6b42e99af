import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { findInvalidOutput } from './outputs.js';

let base: string;
let scratch: string;
before(async () => {
  base = await mkdtemp(path.join(tmpdir(), 'planrun-outputs-test-'));
  scratch = path.join(base, 'scratch');
  await mkdir(path.join(scratch, 'sub'), { recursive: true });
  await mkdir(path.join(base, 'elsewhere'));
  await writeFile(path.join(base, 'elsewhere', 'secret.txt'), 'not the job’s');
  await writeFile(path.join(scratch, 'a.txt'), 'a');
  await writeFile(path.join(scratch, 'sub', 'b.txt'), 'b');
  await symlink(path.join(base, 'elsewhere'), path.join(scratch, 'linked-dir'));
});
after(() => rm(base, { recursive: true, force: true }));

test('regular files inside the scratch folder, nested or not, are valid', async () => {
  assert.equal(await findInvalidOutput(scratch, ['a.txt', './sub/../sub/b.txt']), undefined);
  assert.equal(await findInvalidOutput(scratch, []), undefined);
});

test('each invalid output is permanent "invalid_output" naming it', async () => {
  const cases: Array<[string, RegExp]> = [
    ['', /is an empty name/],
    ['/etc/passwd', /is an absolute path/],
    ['../elsewhere/secret.txt', /points outside the scratch folder/],
    ['sub/../../elsewhere/secret.txt', /points outside the scratch folder/],
    ['missing.txt', /does not exist/],
    ['a.txt/inside-a-file', /does not exist/],
    ['sub', /is a directory/],
    ['linked-dir/secret.txt', /resolves to a file outside the scratch folder/],
  ];
  for (const [output, message] of cases) {
    const error = await findInvalidOutput(scratch, ['a.txt', output]);
    assert.equal(error?.class, 'permanent', output);
    assert.equal(error?.code, 'invalid_output', output);
    assert.match(error?.message ?? '', message, output);
    assert.ok(error?.message.includes(JSON.stringify(output)), `${error?.message} names ${output}`);
  }
});

test('a symbolic link is refused even when it points inside the scratch folder', async () => {
  await symlink(path.join(scratch, 'a.txt'), path.join(scratch, 'link-to-a.txt'));
  assert.match((await findInvalidOutput(scratch, ['link-to-a.txt']))?.message ?? '', /is a symbolic link/);
});

test('the same file listed twice is refused', async () => {
  assert.match((await findInvalidOutput(scratch, ['a.txt', './a.txt']))?.message ?? '', /is listed twice/);
});
