/**
 * `planrun up` as a user runs it, in a folder of its own, and the client commands against
 * it. Everything is spawned asynchronously: a test may serve something in this process
 * (an s3rver) that must keep answering while a command runs.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from './free-port.js';
import { waitFor } from './wait.js';
import { cliPath } from './worker-process.js';

export interface UpProcess {
  child: ChildProcess;
  url: string;
  /** The folder `planrun up` runs in; its data dir is `<dir>/.planrun`. */
  dir: string;
  /** The local key `planrun up` saved. */
  key: string;
  output(): string;
  /** Stops it (SIGTERM, then SIGKILL for it and its workers). */
  stop(): Promise<void>;
}

export interface CliRun {
  status: number | null;
  stdout: string;
  stderr: string;
}

function childPids(pid: number): number[] {
  const listed = spawnSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' }).stdout;
  return listed.split('\n').filter(Boolean).map(Number);
}

/** `planrun up` in `dir` with `args`, on a free port; resolves once it is up and its workers are ready. */
export async function startUp(dir: string, args: string[], env: NodeJS.ProcessEnv, workers = 1): Promise<UpProcess> {
  const port = await freePort();
  const child = spawn(process.execPath, [cliPath, 'up', '--port', String(port), '--workers', String(workers), ...args], {
    cwd: dir,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const workerPids = childPids(child.pid!);
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      for (const pid of workerPids) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    }, 10_000);
    await exited;
    clearTimeout(timer);
  };
  try {
    await waitFor(
      'planrun up to print its banner',
      () => {
        if (child.exitCode !== null) throw new Error(`planrun up exited:\n${output}`);
        return output.includes('planrun is up');
      },
      20_000,
    );
    await waitFor('its workers to be ready', () => (output.match(/worker ready/g) ?? []).length >= workers, 20_000);
  } catch (error) {
    await stop();
    throw error;
  }
  const key = readFileSync(join(dir, '.planrun', 'local-key'), 'utf8').trim();
  return { child, url: `http://127.0.0.1:${port}`, dir, key, output: () => output, stop };
}

/** A planrun command run in `cwd`, without blocking this process. */
export function runCli(args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env, timeoutMs = 60_000): Promise<CliRun> {
  const child = spawn(process.execPath, [cliPath, ...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  return new Promise((resolve) =>
    child.once('exit', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    }),
  );
}
