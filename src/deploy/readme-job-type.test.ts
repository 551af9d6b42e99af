/**
 * Issue 17 section 1 and issue 19 "Job types": the README's "Writing a job type" example
 * runs as written. Both of its forms (the TypeScript module, loaded directly, and the
 * JavaScript one) are taken from README.md itself, put in a user's folder with planrun
 * installed, started with the README's own `planrun up` command line, and run to
 * `finished` by `planrun submit --wait`, with the output the example writes stored.
 *
 * ImageMagick is the one thing the example needs that planrun does not ship: a stand-in
 * `convert` on the PATH copies its input to its output, so the stored thumbnail is the
 * bytes the job downloaded.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { freePort } from '../../test/testing/free-port.js';
import { packageRoot } from '../../test/testing/package-root.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { waitFor } from '../../test/testing/wait.js';
import { cliPath } from '../../test/testing/worker-process.js';

/** The README's "Writing a job type" section: its code blocks by the file name on their first line, and its `planrun up` line. */
function readmeExample(): { modules: Map<string, string>; upCommand: string[] } {
  const readme = readFileSync(join(packageRoot, 'README.md'), 'utf8');
  const section = /^## Writing a job type\n([\s\S]*?)(?=^## )/m.exec(readme)?.[1];
  assert.ok(section, 'README.md has a "Writing a job type" section');
  const modules = new Map<string, string>();
  for (const [, source] of section.matchAll(/^```(?:ts|js)\n([\s\S]*?)^```$/gm)) {
    const file = /^\/\/ (my-jobs\.[a-z]+)/.exec(source!)?.[1];
    if (file) modules.set(file, source!);
  }
  const up = /`(planrun up --jobs \.\/my-jobs\.ts[^`]*)`/.exec(section)?.[1];
  assert.ok(up, 'the section says how to start the example with planrun up');
  return { modules, upCommand: up.split(/\s+/).slice(1) };
}

const example = readmeExample();
const dir = tempDir('planrun-readme-job-type-');
const running: ChildProcess[] = [];
let imageServer: Server;
let imageUrl: string;
const image = Buffer.from('a picture, as far as the stand-in convert can tell');

before(async () => {
  imageServer = createServer((request, response) => {
    if (request.url === '/photo.jpg') response.writeHead(200, { 'content-type': 'image/jpeg' }).end(image);
    else response.writeHead(404).end();
  });
  imageServer.listen(0, '127.0.0.1');
  await once(imageServer, 'listening');
  imageUrl = `http://127.0.0.1:${(imageServer.address() as { port: number }).port}/photo.jpg`;

  const bin = join(dir.path, 'bin');
  mkdirSync(bin);
  writeFileSync(
    join(bin, 'convert'),
    '#!/bin/sh\n# Stands in for ImageMagick: copies its first argument to its last.\nfor last; do :; done\ncat "$1" > "$last"\n',
  );
  chmodSync(join(bin, 'convert'), 0o755);
});

after(async () => {
  for (const child of running) stop(child, 'SIGKILL');
  imageServer?.close();
  dir.remove();
});

/** A user's project: a package.json and planrun installed, as `npm install planrun` leaves it. */
function userProject(name: string, packageJson: object, module: string): string {
  const project = join(dir.path, name);
  mkdirSync(join(project, 'node_modules'), { recursive: true });
  symlinkSync(packageRoot, join(project, 'node_modules', 'planrun'), 'dir');
  writeFileSync(join(project, 'package.json'), JSON.stringify(packageJson, null, 2));
  const source = example.modules.get(module);
  assert.ok(source, `README.md shows ${module}`);
  writeFileSync(join(project, module), source);
  return project;
}

function userEnv(): NodeJS.ProcessEnv {
  return { ...process.env, PATH: `${join(dir.path, 'bin')}:${process.env.PATH ?? ''}` };
}

/** `planrun up` as the README says, on a free port (the one thing changed), in the project folder. */
async function startUp(project: string, module: string): Promise<{ child: ChildProcess; output(): string }> {
  const args = example.upCommand.map((arg) => (arg === './my-jobs.ts' ? `./${module}` : arg));
  const child = spawn(process.execPath, [cliPath, ...args, '--port', String(await freePort())], {
    cwd: project,
    env: userEnv(),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.push(child);
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  await waitFor(
    'planrun up to print its banner',
    () => {
      if (child.exitCode !== null) throw new Error(`planrun up exited with ${child.exitCode}:\n${output}`);
      return output.includes('planrun is up');
    },
    30_000,
  );
  return { child, output: () => output };
}

function stop(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const children = spawnSync('pgrep', ['-P', String(child.pid)], { encoding: 'utf8' })
    .stdout.split('\n')
    .filter(Boolean)
    .map(Number);
  child.kill(signal);
  if (signal === 'SIGKILL') for (const pid of children) process.kill(pid, 'SIGKILL');
}

/**
 * `planrun submit thumbnail --input ... --wait` in the project folder, which finds the
 * saved URL and key of `up`. Not spawnSync: this process serves the picture meanwhile.
 */
async function submitThumbnail(project: string): Promise<{ status: number | null; output: string }> {
  const child = spawn(process.execPath, [cliPath, 'submit', 'thumbnail', '--input', JSON.stringify({ url: imageUrl }), '--wait'], {
    cwd: project,
    env: userEnv(),
    stdio: ['ignore', 'pipe', 'pipe'],
    timeout: 60_000,
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const [status] = (await once(child, 'exit')) as [number | null];
  return { status, output };
}

describe("the README's job type, as a user copies it", () => {
  it('shows the module in TypeScript and in JavaScript', () => {
    assert.deepEqual([...example.modules.keys()].sort(), ['my-jobs.js', 'my-jobs.ts']);
    assert.match(example.modules.get('my-jobs.ts')!, /^import \{ defineJobType, PermanentError, TransientError \} from 'planrun';$/m);
  });

  const forms = [
    // A package.json as `npm init` writes it: no "type", so tsx loads the .ts file as CommonJS.
    { module: 'my-jobs.ts', packageJson: { name: 'my-jobs-ts', version: '1.0.0', private: true } },
    // The README says the JavaScript form is an ES module.
    { module: 'my-jobs.js', packageJson: { name: 'my-jobs-js', version: '1.0.0', private: true, type: 'module' } },
  ];
  for (const { module, packageJson } of forms) {
    it(`${module}: loaded by planrun up --jobs, a thumbnail job runs to finished and its output is stored`, async () => {
      const project = userProject(module.replace('.', '-'), packageJson, module);
      const up = await startUp(project, module);
      try {
        const submitted = await submitThumbnail(project);
        assert.equal(submitted.status, 0, `${submitted.output}\n--- planrun up:\n${up.output()}`);
        assert.match(submitted.output, / finished, attempt 1\//);
        const stored = /^output: thumb\.png (.+)$/m.exec(submitted.output)?.[1];
        assert.ok(stored, submitted.output);
        assert.deepEqual(readFileSync(stored), image);
      } finally {
        stop(up.child, 'SIGTERM');
        await waitFor('planrun up to stop', () => up.child.exitCode !== null || up.child.signalCode !== null, 20_000).catch(() => stop(up.child, 'SIGKILL'));
      }
    });
  }
});
