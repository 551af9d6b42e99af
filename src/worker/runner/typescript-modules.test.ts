/**
 * Issue 19, "Job types": a `--jobs` module in TypeScript is loaded directly, in the
 * process that checks it and in every job process, and an error of no class that its code
 * throws keeps its stack, pointing at the TypeScript line, cut to a bound.
 */
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { MAX_ERROR_STACK_LENGTH } from '../../core/errors.js';
import { tempDir } from '../../../test/testing/temp-dir.js';
import { loadJobTypes } from './job-type.js';
import { ProcessPool, type RunOutcome } from './pool.js';
import { createScratch } from './scratch.js';

const dir = tempDir('planrun-typescript-modules-');

// A folder whose package.json says nothing of "type", as `npm init` leaves it: tsx takes a
// .ts file there as CommonJS, as Node would its .js twin. A .mts file is ESM anywhere.
const project = join(dir.path, 'project');
mkdirSync(project);
writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'jobs', private: true }));

const commonJsModule = join(project, 'buggy-jobs.ts');
writeFileSync(
  commonJsModule,
  [
    'interface Totals {', //                                                           1
    '  sum: number;', //                                                               2
    '}', //                                                                            3
    'function total(values: number[]): Totals {', //                                   4
    "  if (values.length === 0) throw new TypeError('no values to add up');", //       5
    '  return { sum: values.reduce((a, b) => a + b, 0) };', //                         6
    '}', //                                                                            7
    'export default [', //                                                             8
    "  { name: 'add', run: ({ input }: { input: unknown }) => ({ data: total(input as number[]) }) },",
    "  { name: 'long-stack', run: () => { throw new Error('x'.repeat(10_000)); } },",
    '];',
  ].join('\n'),
);
const esmModule = join(project, 'more-jobs.mts');
writeFileSync(esmModule, "const greeting: string = 'hello';\nexport default [{ name: 'greet', run: () => ({ data: greeting }) }];\n");
const jsModule = join(project, 'plain-jobs.mjs');
writeFileSync(jsModule, "export default [{ name: 'plain', run: () => ({}) }];\n");

let pool: ProcessPool;
let jobs = 0;

before(() => {
  pool = new ProcessPool({ jobModules: [commonJsModule, esmModule], size: 1, progressThrottleMs: 0 });
});
after(async () => {
  await pool?.close();
  dir.remove();
});

async function run(type: string, input: unknown): Promise<RunOutcome> {
  const jobId = `job-${++jobs}`;
  const scratchDir = await createScratch(join(dir.path, 'scratch'), jobId, 1);
  return pool.run({ jobId, attempt: 1, tenant: 'acme', type, input, scratchDir }, { onProgress: () => {} });
}

describe('TypeScript job modules', () => {
  it('tsx is registered only once a TypeScript module is loaded', async () => {
    // tsx turns source maps on when it registers; nothing else in this process does.
    await loadJobTypes(jsModule);
    assert.equal(process.sourceMapsEnabled, false, 'loading JavaScript alone leaves tsx out');
    const loaded = await Promise.all([loadJobTypes(commonJsModule), loadJobTypes(esmModule)]);
    assert.deepEqual(
      loaded.flat().map((type) => type.name),
      ['add', 'long-stack', 'greet'],
    );
    assert.equal(process.sourceMapsEnabled, true);
  });

  it("a CommonJS module compiled from ESM (tsc's module: commonjs) is taken by its exports.default", async () => {
    const compiled = join(project, 'compiled-jobs.cjs');
    writeFileSync(
      compiled,
      '"use strict";\nObject.defineProperty(exports, "__esModule", { value: true });\nexports.default = [{ name: "compiled", run: () => ({}) }];\n',
    );
    assert.deepEqual(
      (await loadJobTypes(compiled)).map((type) => type.name),
      ['compiled'],
    );
  });

  it('a job process loads .ts (as CommonJS here) and .mts modules and runs their jobs', async () => {
    assert.deepEqual(await run('add', [1, 2, 3]), { ok: true, result: { data: { sum: 6 } } });
    assert.deepEqual(await run('greet', null), { ok: true, result: { data: 'hello' } });
  });

  it('an error of no class keeps its stack, naming the TypeScript file and line', async () => {
    const outcome = await run('add', []);
    assert.ok(!outcome.ok);
    assert.deepEqual([outcome.error.class, outcome.error.code, outcome.error.message], ['transient', 'unclassified', 'no values to add up']);
    assert.match(outcome.error.stack ?? '', /^TypeError: no values to add up\n\s+at total \(.*buggy-jobs\.ts:5:\d+\)/);
  });

  it('a stack is cut to its bound', async () => {
    const outcome = await run('long-stack', null);
    assert.ok(!outcome.ok);
    assert.equal(outcome.error.message.length, 10_000);
    const stack = outcome.error.stack ?? '';
    assert.equal(stack.length, MAX_ERROR_STACK_LENGTH);
    assert.match(stack, /^Error: x{100}/);
    assert.match(stack, /\[\.\.\.the stack goes on: cut at 4096 characters\]$/);
  });
});
