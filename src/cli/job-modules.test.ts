/**
 * Issue 18, finding 6: a `--jobs` module that cannot load used to surface only in the
 * workers (a restart loop of stack traces behind a ready API). `planrun up` and `planrun
 * worker` now check it before anything starts and exit 2 with one line. Issue 19: a
 * TypeScript module is loaded (through tsx), and its mistakes are told the same way.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { freePort } from '../../test/testing/free-port.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { cliPath } from '../../test/testing/worker-process.js';

const dir = tempDir('planrun-job-modules-');
after(() => dir.remove());

function moduleFile(name: string, source: string): string {
  const file = join(dir.path, name);
  writeFileSync(file, source);
  return file;
}

const cases: Array<{ what: string; module: string; expect: RegExp }> = [
  {
    what: 'a syntax error',
    module: moduleFile('syntax.mjs', 'export default [\n  { name: "a", run() {} }\n};\n'),
    expect: /syntax\.mjs:3: SyntaxError: Unexpected token/,
  },
  {
    what: 'a syntax error in a .js file',
    module: moduleFile('syntax.js', 'export default [\n\n  { name: "a" run() {} },\n];\n'),
    expect: /syntax\.js:3: SyntaxError: /,
  },
  { what: 'a missing file', module: join(dir.path, 'missing.js'), expect: /missing\.js: no such file/ },
  {
    what: 'no default export',
    module: moduleFile('no-default.mjs', 'export const jobs = [];\n'),
    expect: /no-default\.mjs must default-export a list of job types .*its default export is undefined/,
  },
  {
    what: 'a default export that is not a list',
    module: moduleFile('number.mjs', 'export default 5;\n'),
    expect: /number\.mjs must default-export a list .*the number 5/,
  },
  {
    what: 'invalid job types',
    module: moduleFile('invalid.mjs', 'export default [{ name: "a" }, { name: "b c", run() {} }];\n'),
    expect: /invalid job types module .*invalid\.mjs: job type #0 "a": run is missing .*; job type #1 "b c": name "b c" must start/,
  },
  {
    what: 'a job-types file that is not JSON',
    module: moduleFile('broken.json', '{"jobTypes": ['),
    expect: /cannot load job types file .*broken\.json: /,
  },
  {
    what: 'a command whose program is not there',
    module: moduleFile('ghost.yaml', 'jobTypes:\n  - name: ghost\n    command: [planrun-no-such-program]\n'),
    expect: /cannot run command job types: job type "ghost": program "planrun-no-such-program" is not in the job's PATH/,
  },
  {
    what: 'an error thrown while loading',
    module: moduleFile('throws.mjs', 'const x = 1;\nthrow new Error("no GPU here");\n'),
    expect: /throws\.mjs:2 failed to load: Error: no GPU here/,
  },
  {
    what: 'a syntax error in a TypeScript file',
    module: moduleFile('syntax.ts', 'const n: number = 1;\nexport default [\n  { name: "a", run() {} }\n};\n'),
    expect: /syntax\.ts:4: SyntaxError: Expected "\]" but found "\}"$/,
  },
  {
    what: 'an error thrown while a TypeScript file loads (the line is the .ts line)',
    module: moduleFile(
      'throws.ts',
      'interface Gpu {\n  ok: boolean;\n}\nconst gpu: Gpu = { ok: false };\nif (!gpu.ok) throw new Error("no GPU here");\nexport default [];\n',
    ),
    expect: /throws\.ts:5 failed to load: Error: no GPU here$/,
  },
  {
    what: 'an empty TypeScript module',
    module: moduleFile('empty.mts', 'const jobs: never[] = [];\nexport default jobs;\n'),
    expect: /invalid job types module .*empty\.mts: the list is empty$/,
  },
  {
    what: 'a type defined twice',
    module: moduleFile('twice.mjs', 'export default [{ name: "sleep", run() {} }];\n'),
    expect: /job type "sleep" is defined twice/,
  },
];

for (const command of ['up', 'worker'] as const) {
  describe(`planrun ${command} --jobs with a module that cannot load`, () => {
    for (const { what, module, expect } of cases) {
      it(`exits 2 before starting anything, with one line: ${what}`, async () => {
        const port = await freePort();
        // No broker is reachable at this URL: a command that got past the check would fail otherwise, or hang.
        const args =
          command === 'up' ? ['up', '--port', String(port), '--data-dir', join(dir.path, `data-${port}`)] : ['worker', '--amqp', 'amqp://127.0.0.1:1'];
        const run = spawnSync(process.execPath, [cliPath, ...args, '--jobs', module], { cwd: dir.path, encoding: 'utf8', timeout: 20_000 });
        assert.equal(run.status, 2, run.stderr + run.stdout);
        const lines = run.stderr.trimEnd().split('\n');
        assert.equal(lines.length, 1, `one line, not:\n${run.stderr}`);
        assert.match(lines[0]!, /^planrun: /);
        assert.match(lines[0]!, expect);
        assert.doesNotMatch(run.stdout, /planrun is up/);
      });
    }
  });
}
