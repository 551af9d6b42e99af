/**
 * Issue 17 section 1: what a job-type author and an app import from `planrun` is there,
 * at run time and in the published types. `examples/` is a user's TypeScript project
 * (a job-types module and an app using the client) that `tsc` checks against the
 * package's own `dist/index.d.ts`, reached by the package's name as a user reaches it;
 * the README's TypeScript job type is checked the same way.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { packageRoot } from '../test/testing/package-root.js';
import { tempDir } from '../test/testing/temp-dir.js';
import { loadJobTypes } from './worker/runner/job-type.js';

const root = packageRoot;
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const dir = tempDir('planrun-public-surface-');
after(() => dir.remove());

function typecheck(project: string): { status: number | null; output: string } {
  const run = spawnSync(process.execPath, [tsc, '-p', project, '--noEmit'], { cwd: root, encoding: 'utf8', timeout: 120_000 });
  return { status: run.status, output: run.stdout + run.stderr };
}

describe('the public surface', () => {
  it("exports what a job-types module needs from the package's entry, by the package's name", async () => {
    const name = 'planrun'; // through package.json "exports", as a user's import goes
    const planrun = (await import(name)) as Record<string, unknown>;
    for (const value of ['defineJobType', 'PermanentError', 'TransientError', 'FatalError', 'Client', 'isPlanrunApiError']) {
      assert.equal(typeof planrun[value], 'function', `planrun exports ${value}`);
    }
    const defineJobType = planrun.defineJobType as (jobType: object) => object;
    assert.throws(() => defineJobType({ name: 'no run' }), /invalid job type "no run": .*run is missing/);
  });

  it('examples/ type-checks against the published types (tsc -p examples/tsconfig.json --noEmit)', () => {
    const checked = typecheck(join(root, 'examples', 'tsconfig.json'));
    assert.equal(checked.status, 0, checked.output);
  });

  it("the README's TypeScript job type type-checks against the published types", () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    const section = /^## Writing a job type\n([\s\S]*?)(?=^## )/m.exec(readme)?.[1] ?? '';
    const source = /^```ts\n(\/\/ my-jobs\.ts\n[\s\S]*?)^```$/m.exec(section)?.[1];
    assert.ok(source, 'README.md shows my-jobs.ts');
    const project = join(dir.path, 'readme-project');
    mkdirSync(join(project, 'node_modules'), { recursive: true });
    symlinkSync(root, join(project, 'node_modules', 'planrun'), 'dir');
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'my-jobs', private: true, type: 'module' }));
    writeFileSync(join(project, 'my-jobs.ts'), source);
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        extends: join(root, 'examples', 'tsconfig.json'),
        compilerOptions: { typeRoots: [join(root, 'node_modules', '@types')] },
        include: ['my-jobs.ts'],
      }),
    );
    const checked = typecheck(join(project, 'tsconfig.json'));
    assert.equal(checked.status, 0, checked.output);
  });

  it("the examples' job-types module loads as planrun loads it, TypeScript and all", async () => {
    const jobTypes = await loadJobTypes(join(root, 'examples', 'report-jobs.ts'));
    assert.deepEqual(
      jobTypes.map((type) => [type.name, type.requires]),
      [
        ['csv-report', undefined],
        ['gpu-check', ['gpu']],
      ],
    );
  });
});
