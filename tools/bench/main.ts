/**
 * `npm run bench [-- --quick] [--only a,b] [--set key=value ...] [--out FILE | --no-write] [--cpu-prof DIR] [--save-run FILE] [--note TEXT]`
 * `npm run bench -- --render FILE [--out FILE] [--note TEXT]`
 *
 * Runs the benchmark (bench.ts) and prints its table; writes docs/benchmarks.md unless
 * `--no-write` (or `--out` names another file). `--set` overrides one count of the
 * profile (e.g. `--set jobs=5000`); a run with overrides is not written by default.
 * `--save-run` keeps the run's raw results as JSON; `--render` turns such a file back
 * into the table and the page without measuring anything again. `--note TEXT` adds a
 * remark to the page (e.g. other work seen on the machine during the run).
 *
 * The services come from PLANRUN_BENCH_AMQP_URL, PLANRUN_BENCH_POSTGRES_URL,
 * PLANRUN_BENCH_REDIS_HOST and PLANRUN_BENCH_REDIS_PORT (defaults: the local ones);
 * PLANRUN_BENCH_DISPATCH=fifo runs the planrun rows with fifo dispatch instead of fair.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runBench, writeReport } from './bench.js';
import { defaultEnvironment, fullProfile, quickProfile, sectionNames, type BenchProfile, type SectionName } from './options.js';
import type { BenchRun } from './results.js';

/** docs/benchmarks.md of the package this file belongs to (run from .build/tools/bench/ or any other build folder). */
function docsPage(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error('cannot find the package root to write docs/benchmarks.md; use --out FILE');
    dir = parent;
  }
  return join(dir, 'docs', 'benchmarks.md');
}

function parse(argv: string[]) {
  let profile: BenchProfile = fullProfile;
  let only: SectionName[] | undefined;
  let out: string | undefined = docsPage();
  let overridden = false;
  let outGiven = false;
  let cpuProfileDir: string | undefined;
  let saveRun: string | undefined;
  let render: string | undefined;
  let note: string | undefined;
  const overrides: Record<string, number> = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const value = () => {
      const next = argv[++i];
      if (next === undefined) throw new Error(`${arg} needs a value`);
      return next;
    };
    if (arg === '--quick') profile = quickProfile;
    else if (arg === '--only') {
      only = value().split(',') as SectionName[];
      for (const name of only) if (!sectionNames.includes(name)) throw new Error(`unknown section ${name}; sections: ${sectionNames.join(', ')}`);
    } else if (arg === '--set') {
      const [key, raw] = value().split('=');
      if (!key || !(key in fullProfile) || key === 'name' || !Number.isFinite(Number(raw)))
        throw new Error(`--set needs key=number with a key of ${Object.keys(fullProfile).join(', ')}`);
      overrides[key] = Number(raw);
      overridden = true;
    } else if (arg === '--out') {
      out = resolve(value());
      outGiven = true;
    } else if (arg === '--no-write') {
      out = undefined;
      outGiven = true;
    } else if (arg === '--cpu-prof') cpuProfileDir = resolve(value());
    else if (arg === '--save-run') saveRun = resolve(value());
    else if (arg === '--render') render = resolve(value());
    else if (arg === '--note') note = value();
    else throw new Error(`unknown argument ${arg}`);
  }
  // A partial or resized run must not replace the page of a real one unless asked to.
  if (!outGiven && (overridden || only)) out = undefined;
  return { profile: { ...profile, ...overrides }, only, out, cpuProfileDir, saveRun, render, note };
}

/** How the run was asked for, as the page shows it: without where its outputs went, which measure nothing. */
function commandLine(args: string[]): string {
  const hidden = ['--save-run', '--out', '--note'];
  const shown = args.filter((arg, i) => !hidden.includes(arg) && !hidden.includes(args[i - 1] ?? ''));
  return ['npm run bench', ...(shown.length > 0 ? ['--', ...shown] : [])].join(' ');
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const { profile, only, out, cpuProfileDir, saveRun, render, note } = parse(args);
  if (render) {
    const saved = JSON.parse(readFileSync(render, 'utf8')) as { run: BenchRun; profile: BenchProfile };
    if (note !== undefined) saved.run.note = note;
    process.stdout.write(`${await writeReport(saved.run, saved.profile, defaultEnvironment, out)}\n`);
    if (out) process.stderr.write(`[bench] written to ${out}\n`);
    return;
  }
  const { run, table } = await runBench({
    profile,
    ...(only ? { only } : {}),
    ...(out ? { writeTo: out } : {}),
    ...(cpuProfileDir ? { cpuProfileDir } : {}),
    command: commandLine(args),
    ...(note === undefined ? {} : { note }),
    log: (line) => process.stderr.write(`${line}\n`),
  });
  process.stdout.write(`${table}\n`);
  if (out) process.stderr.write(`[bench] written to ${out}\n`);
  if (saveRun) writeFileSync(saveRun, `${JSON.stringify({ run, profile }, null, 2)}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
