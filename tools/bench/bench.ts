/**
 * One benchmark run: every section in its own process, in order, then one markdown
 * table, printed and (unless told not to) written into docs/benchmarks.md with the
 * machine description and the command that produced it.
 */
import { fork } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { describeMachine } from './machine.js';
import { load1 } from './measure.js';
import { defaultEnvironment, sectionNames, type BenchEnvironment, type BenchProfile, type SectionName, type SectionRequest } from './options.js';
import { profilingArgs } from './peers.js';
import { renderPage, renderTable } from './report.js';
import type { BenchRun, SectionResult } from './results.js';

const sectionEntry = fileURLToPath(new URL('./section-process.js', import.meta.url));

export interface BenchOptions {
  profile: BenchProfile;
  env?: BenchEnvironment;
  /** Sections to run (default: all). */
  only?: readonly SectionName[];
  /** Where the page goes (default: none). */
  writeTo?: string;
  /** How the run was started, for the page. */
  command: string;
  /** A remark for the page. */
  note?: string;
  cpuProfileDir?: string;
  /** Told about each section as it starts and ends. */
  log?: (line: string) => void;
}

export async function runBench(options: BenchOptions): Promise<{ run: BenchRun; table: string }> {
  const env = options.env ?? defaultEnvironment;
  const log = options.log ?? (() => undefined);
  const run: BenchRun = {
    profile: options.profile.name,
    startedAt: new Date().toISOString(),
    command: options.command,
    loadAtStart: loadavg().map((l) => Math.round(l * 100) / 100),
    ...(options.note === undefined ? {} : { note: options.note }),
    sections: {},
  };
  for (const section of sectionNames) {
    if (options.only && !options.only.includes(section)) continue;
    log(`[bench] ${section}: starting (load ${load1()})`);
    const started = Date.now();
    try {
      run.sections[section] = await runSection({
        section,
        profile: options.profile,
        env,
        ...(options.cpuProfileDir ? { cpuProfileDir: options.cpuProfileDir } : {}),
      });
      log(`[bench] ${section}: done in ${((Date.now() - started) / 1000).toFixed(1)} s: ${JSON.stringify(run.sections[section])}`);
    } catch (error) {
      run.sections[section] = { error: error instanceof Error ? error.message : String(error) };
      log(`[bench] ${section}: FAILED: ${run.sections[section].error}`);
    }
  }
  return { run, table: await writeReport(run, options.profile, env, options.writeTo) };
}

/** Renders the table of a run and, given a file, the page with the machine description. */
export async function writeReport(run: BenchRun, profile: BenchProfile, env: BenchEnvironment, writeTo: string | undefined): Promise<string> {
  const table = renderTable(run);
  if (writeTo) writeFileSync(writeTo, renderPage(run, profile, await describeMachine(env), table));
  return table;
}

function runSection(request: SectionRequest): Promise<SectionResult> {
  return new Promise((resolve, reject) => {
    const child = fork(sectionEntry, [JSON.stringify(request)], {
      execArgv: ['--expose-gc', ...profilingArgs(request.cpuProfileDir)],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    let answered = false;
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`section ${request.section} did not finish within ${request.profile.sectionTimeoutMs} ms`));
    }, request.profile.sectionTimeoutMs + 30_000);
    child.on('message', (message: { ok: boolean; result?: SectionResult; error?: string }) => {
      answered = true;
      clearTimeout(timer);
      if (message.ok) resolve(message.result!);
      else reject(new Error(message.error));
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (!answered) reject(new Error(`section ${request.section} exited (${code ?? signal}) without a result`));
    });
  });
}
