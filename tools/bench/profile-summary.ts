/**
 * `node .build/tools/bench/profile-summary.js FILE.cpuprofile... [TOP]`
 *
 * Summarises V8 CPU profiles (as `npm run bench -- --cpu-prof DIR` leaves them; several
 * files are added up, e.g. a worker's sixteen job processes): the
 * functions with the most self time, the most inclusive time (a function counted once
 * per sample however deep it recurses), and self time by area (an npm package, a file of
 * planrun, a part of Node). Shares are of the busy samples (idle left out), as
 * docs/performance.md quotes them.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

export interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  /** Microseconds before each sample; a sample's time is the delta that follows it. */
  timeDeltas: number[];
}

export interface Share {
  name: string;
  ms: number;
  /** Of the busy time. */
  percent: number;
}

export interface ProfileSummary {
  busyMs: number;
  sampledMs: number;
  self: Share[];
  inclusive: Share[];
  areas: Share[];
}

/** Where a function lives: `npm:<package>`, `src/<path>` (or tools/, test/), `node:<module>`, or V8's own (GC, program). */
export function areaOf(frame: CallFrame): string {
  const url = frame.url;
  if (url === '') return frame.functionName.startsWith('(') ? frame.functionName : '(native)';
  if (url.startsWith('node:')) return url.split('/').slice(0, 2).join('/');
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return `npm:${pkg[1]}`;
  const own = /\/((?:src|tools|test)\/.*)$/.exec(url);
  return own ? own[1]!.replace(/^.*?\b(src|tools|test)\//, '$1/') : url;
}

/** Summarises one profile, or several added up (the processes of one kind). */
export function summarise(profiles: CpuProfile | CpuProfile[], top: number): ProfileSummary {
  const name = (frame: CallFrame) => `${frame.functionName || '(anonymous)'} ${areaOf(frame)}:${frame.lineNumber + 1}`;
  const self = new Map<string, number>();
  const inclusive = new Map<string, number>();
  const areas = new Map<string, number>();
  const add = (map: Map<string, number>, key: string, us: number) => map.set(key, (map.get(key) ?? 0) + us);
  let idle = 0;
  let sampled = 0;
  for (const profile of Array.isArray(profiles) ? profiles : [profiles]) {
    const byId = new Map(profile.nodes.map((node) => [node.id, node]));
    const parent = new Map<number, number>();
    for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
    const timeOf = new Map<number, number>();
    profile.samples.forEach((id, i) => {
      const us = profile.timeDeltas[i + 1] ?? 0;
      timeOf.set(id, (timeOf.get(id) ?? 0) + us);
      sampled += us;
    });
    for (const [id, us] of timeOf) {
      const frame = byId.get(id)!.callFrame;
      if (frame.functionName === '(idle)') {
        idle += us;
        continue;
      }
      add(self, name(frame), us);
      add(areas, areaOf(frame), us);
      const seen = new Set<string>();
      for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
        const key = name(byId.get(at)!.callFrame);
        if (seen.has(key)) continue;
        seen.add(key);
        add(inclusive, key, us);
      }
    }
  }
  const busy = sampled - idle;
  const ranked = (map: Map<string, number>) =>
    [...map]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([key, us]) => ({ name: key, ms: us / 1000, percent: busy === 0 ? 0 : (100 * us) / busy }));
  return { busyMs: busy / 1000, sampledMs: sampled / 1000, self: ranked(self), inclusive: ranked(inclusive), areas: ranked(areas) };
}

function render(files: string[], summary: ProfileSummary): string {
  const rows = (shares: Share[]) => shares.map((s) => `${s.percent.toFixed(1).padStart(5)}% ${s.ms.toFixed(0).padStart(7)} ms  ${s.name}`).join('\n');
  const what = files.length === 1 ? files[0]! : `${files.length} profiles`;
  return [
    `${what}: ${summary.busyMs.toFixed(0)} ms busy of ${summary.sampledMs.toFixed(0)} ms sampled`,
    `\nself time\n${rows(summary.self)}`,
    `\ninclusive time\n${rows(summary.inclusive)}`,
    `\nself time by area\n${rows(summary.areas)}`,
  ].join('\n');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const top = args.length > 1 && /^\d+$/.test(args.at(-1)!) ? Number(args.pop()) : 15;
  if (args.length === 0 || top < 1) {
    process.stderr.write('usage: profile-summary FILE.cpuprofile... [TOP]\n');
    process.exit(2);
  }
  const profiles = args.map((file) => JSON.parse(readFileSync(file, 'utf8')) as CpuProfile);
  process.stdout.write(`${render(args, summarise(profiles, top))}\n`);
}
