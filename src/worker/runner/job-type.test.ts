import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { defineJobType, loadJobTypeRegistry, loadJobTypes, toModuleUrl } from './job-type.js';

const SHIPPED_JOBS = new URL('../../job-types/index.js', import.meta.url).href;

/** A job-types module made on the spot, so each bad shape needs no fixture file. */
function moduleOf(source: string): string {
  return `data:text/javascript,${encodeURIComponent(source)}`;
}

describe('defineJobType', () => {
  test('returns a valid job type as it is', () => {
    const jobType = { name: 'resize-image', requires: ['imagemagick'], outputReserveBytes: 1024, run: () => ({}) };
    assert.equal(defineJobType(jobType), jobType);
  });

  test('refuses a bad definition, naming every problem', () => {
    const bad = { name: 'with.dot', requires: ['gpu', 'a,b'], outputReserveBytes: -1, run: 'not a function', retries: 3 };
    assert.throws(
      () => defineJobType(bad as never),
      (error: Error) => {
        assert.match(error.message, /^invalid job type "with\.dot": /);
        assert.match(error.message, /unknown property "retries"/);
        assert.match(error.message, /name "with\.dot" must start with a letter/);
        assert.match(error.message, /requires holds the string "a,b"/);
        assert.match(error.message, /outputReserveBytes is the number -1/);
        assert.match(error.message, /run is the string "not a function", not a function/);
        return true;
      },
    );
  });

  test('refuses to declare planrun’s own settings or credentials as environment the job needs', () => {
    for (const name of ['PLANRUN_FLEET_KEY', 'PLANRUN_AMQP_URL', 'MY_AMQP_URL', 'AWS_SECRET_ACCESS_KEY', 'HOME', 'NODE_CHANNEL_FD']) {
      assert.throws(() => defineJobType({ name: 'greedy', env: [name], run: () => ({}) }), new RegExp(`env: ${name} is never handed to job code: `));
    }
    assert.throws(() => defineJobType({ name: 'odd', env: ['1X'], run: () => ({}) }), /env: "1X" is not an environment variable name/);
    assert.equal(defineJobType({ name: 'hf', env: ['HF_HOME'], run: () => ({}) }).env?.[0], 'HF_HOME');
  });

  test('checks timeouts, network and limits', () => {
    const bad = { name: 'odd', timeoutSeconds: 0.5, timeoutClass: 'fatal', network: 'yes', limits: { memoryMb: 1, disk: 3 }, run: () => ({}) };
    assert.throws(
      () => defineJobType(bad as never),
      (error: Error) =>
        [
          'network is the string "yes", not true or false',
          'timeoutSeconds is the number 0.5, not a whole number of seconds >= 1',
          'timeoutClass is the string "fatal", not "transient" or "permanent"',
          'limits.memoryMb is the number 1, not a whole number >= 64',
          'limits has unknown property "disk"',
        ].every((part) => error.message.includes(part)),
    );
  });

  test('names a missing name and a missing run', () => {
    assert.throws(() => defineJobType({} as never), /invalid job type \(unnamed\): name is missing; run is missing/);
  });

  test('takes a command instead of run, with the same options', () => {
    const jobType = { name: 'upscale', command: ['python3', 'upscale.py'], env: ['HF_HOME'], network: true, timeoutSeconds: 60, limits: { memoryMb: 512 } };
    assert.equal(defineJobType(jobType), jobType);
  });

  test('wants exactly one of run and command, and a command as a list of strings naming a program', () => {
    const cases: [unknown, RegExp][] = [
      [
        { name: 'both', command: ['true'], run: () => ({}) },
        /has both run and command; a job type is either run\(ctx\) in Node or a command: \[program, \.\.\.args\]/,
      ],
      [{ name: 'neither' }, /run is missing \(every job type needs run\(ctx\), or a command: \[program, \.\.\.args\]\)/],
      [{ name: 'string', command: 'python3 upscale.py' }, /command is the string "python3 upscale\.py", not a list of strings \[program, \.\.\.args\]/],
      [{ name: 'empty', command: [] }, /command is .*, not a list of strings/],
      [{ name: 'numbers', command: ['sleep', 5] }, /command is .*, not a list of strings/],
      [{ name: 'blank', command: [''] }, /command names no program: its first item is empty/],
      [{ name: 'nul', command: ['sh', 'a\0b'] }, /command holds a NUL character/],
    ];
    for (const [bad, message] of cases) assert.throws(() => defineJobType(bad as never), message);
  });

  test('refuses to declare the job protocol’s own names as environment to pass', () => {
    assert.throws(
      () => defineJobType({ name: 'greedy', env: ['PLANRUN_RESULT_FILE'], command: ['true'] }),
      /env: PLANRUN_RESULT_FILE is never handed to job code: the worker sets it for each command job/,
    );
  });
});

describe('job-types files (JSON, YAML)', () => {
  let folder: string;
  before(async () => {
    folder = await mkdtemp(path.join(tmpdir(), 'planrun-job-types-file-'));
    await writeFile(path.join(folder, 'upscale.py'), 'print("hi")\n');
    await mkdir(path.join(folder, 'bin'));
  });
  after(() => rm(folder, { recursive: true, force: true }));

  test('a JSON file of command job types loads; scripts and programs with a / resolve against its folder', async () => {
    const file = path.join(folder, 'jobs.json');
    await writeFile(
      file,
      JSON.stringify({
        jobTypes: [
          { name: 'upscale', command: ['python3', 'upscale.py', '--scale', '2'], timeoutSeconds: 60 },
          { name: 'tool', command: ['bin/tool', '/etc/hosts'] },
        ],
      }),
    );
    const jobTypes = await loadJobTypes(file);
    assert.deepEqual(
      jobTypes.map((jobType) => jobType.command),
      [
        ['python3', path.join(folder, 'upscale.py'), '--scale', '2'],
        [path.join(folder, 'bin/tool'), '/etc/hosts'],
      ],
    );
    assert.equal(jobTypes[0]!.timeoutSeconds, 60);
  });

  test('a YAML file loads the same way', async () => {
    const file = path.join(folder, 'jobs.yaml');
    await writeFile(file, 'jobTypes:\n  - name: upscale\n    command: [python3, upscale.py]\n    network: true\n');
    const [jobType] = await loadJobTypes(file);
    assert.deepEqual(jobType, { name: 'upscale', command: ['python3', path.join(folder, 'upscale.py')], network: true });
  });

  test('a file is checked like a module: every problem named, a run is no code', async () => {
    const file = path.join(folder, 'bad.json');
    await writeFile(
      file,
      JSON.stringify({
        jobTypes: [
          { name: 'a', run: 'main' },
          { name: 'a', command: ['true'], retries: 2 },
        ],
      }),
    );
    await assert.rejects(loadJobTypes(file), (error: Error) => {
      assert.match(error.message, /job type #0 "a": run is the string "main", not a function/);
      assert.match(error.message, /job type #1 "a": unknown property "retries"/);
      assert.match(error.message, /job type #1 "a": duplicate name/);
      return true;
    });
  });

  test('a file of another shape, or not JSON, names the file and the shape it needs', async () => {
    const list = path.join(folder, 'list.json');
    await writeFile(list, JSON.stringify([{ name: 'a', command: ['true'] }]));
    await assert.rejects(
      loadJobTypes(list),
      /job types file .*list\.json must hold \{ "jobTypes": \[\{ "name": \.\.\., "command": \[\.\.\.\] \}, \.\.\.\] \}; it holds a list/,
    );
    const broken = path.join(folder, 'broken.json');
    await writeFile(broken, '{"jobTypes": [');
    await assert.rejects(loadJobTypes(broken), /cannot load job types file .*broken\.json: /);
  });
});

describe('loadJobTypes', () => {
  test('loads the shipped job types', async () => {
    const jobTypes = await loadJobTypes(SHIPPED_JOBS);
    assert.deepEqual(
      jobTypes.map((jobType) => jobType.name),
      ['sleep', 'checksum', 'transcode'],
    );
  });

  const badModules: Array<[string, string, RegExp]> = [
    ['no default export', 'export const jobs = []', /must default-export a list of job types .*its default export is undefined/],
    ['not a list', 'export default { name: "a", run() {} }', /its default export is an object/],
    ['an empty list', 'export default []', /the list is empty/],
    ['a missing run', 'export default [{ name: "a" }]', /job type #0 "a": run is missing/],
    ['an entry that is not an object', 'export default [() => {}]', /job type #0 \(unnamed\): is a function, not a job type object/],
    [
      'a duplicate name',
      'export default [{ name: "a", run() {} }, { name: "b", run() {} }, { name: "a", run() {} }]',
      /job type #2 "a": duplicate name, job type #0 is also called "a"/,
    ],
  ];
  for (const [what, source, message] of badModules) {
    test(`refuses a module with ${what}, naming the module`, async () => {
      const url = moduleOf(source);
      await assert.rejects(loadJobTypes(url), (error: Error) => {
        assert.ok(error.message.includes(url), `${error.message} names the module`);
        assert.match(error.message, message);
        return true;
      });
    });
  }

  test('lists every problem of a module at once', async () => {
    await assert.rejects(
      loadJobTypes(moduleOf('export default [{ name: "a" }, { run() {} }]')),
      /invalid job types module .*:\n {2}- job type #0 "a": run is missing.*\n {2}- job type #1 \(unnamed\): name is missing/,
    );
  });

  test('a module that cannot be imported is named in the error', async () => {
    await assert.rejects(loadJobTypes('./no/such/jobs.js'), /cannot load job types module \.\/no\/such\/jobs\.js: /);
  });
});

describe('loadJobTypeRegistry', () => {
  test('gathers the job types of several modules by name', async () => {
    const registry = await loadJobTypeRegistry([SHIPPED_JOBS, moduleOf('export default [{ name: "extra", run() {} }]')]);
    assert.deepEqual([...registry.keys()], ['sleep', 'checksum', 'transcode', 'extra']);
  });

  test('refuses a name that two modules define', async () => {
    const other = moduleOf('export default [{ name: "sleep", run() {} }]');
    await assert.rejects(loadJobTypeRegistry([SHIPPED_JOBS, other]), /job type "sleep" is defined twice: in .*index\.js and in data:/);
  });
});

test('toModuleUrl keeps URLs and resolves paths against the current directory', () => {
  assert.equal(toModuleUrl('file:///srv/jobs.js'), 'file:///srv/jobs.js');
  assert.equal(toModuleUrl('/srv/jobs.js'), 'file:///srv/jobs.js');
  assert.equal(toModuleUrl('jobs.js'), new URL('jobs.js', `file://${process.cwd()}/`).href);
});
