/**
 * Starts `planrun worker` as a real child process (the built CLI), for tests that kill,
 * stop or crash a worker the way an operator or the kernel would.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { waitFor } from './wait.js';

export const cliPath = fileURLToPath(new URL('../../src/cli/main.js', import.meta.url));

export interface WorkerProcess {
  child: ChildProcess;
  /** Everything it logged so far (JSON lines on stderr). */
  log(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export async function startWorkerProcess(args: string[]): Promise<WorkerProcess> {
  return startPlanrunProcess(['worker', ...args], '"msg":"worker ready"');
}

/** Starts `planrun <args>` (in this process's environment, or `env`) and resolves once its output shows `readyText`. */
export async function startPlanrunProcess(args: string[], readyText: string, env: NodeJS.ProcessEnv = process.env): Promise<WorkerProcess> {
  const child = spawn(process.execPath, [cliPath, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...env, PLANRUN_LOG_LEVEL: 'info' } });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  let gone = false;
  void exited.then(() => (gone = true));
  await waitFor(
    `planrun ${args[0]} to be ready`,
    () => {
      if (gone) throw new Error(`planrun ${args[0]} exited before it was ready:\n${output}`);
      return output.includes(readyText);
    },
    15_000,
  );
  return { child, log: () => output, exited };
}
