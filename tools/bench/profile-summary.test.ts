import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { areaOf, summarise, type CpuProfile } from './profile-summary.js';

const frame = (functionName: string, url = '', lineNumber = 0) => ({ functionName, url, lineNumber });

// root -> run (src) -> commit (better-sqlite3); run -> run (recursion) -> write (node); plus idle.
const profile: CpuProfile = {
  nodes: [
    { id: 1, callFrame: frame('(root)'), children: [2, 5] },
    { id: 2, callFrame: frame('run', 'file:///x/.build/src/ledger/group-commit.js', 9), children: [3, 4] },
    { id: 3, callFrame: frame('commit', 'file:///x/node_modules/better-sqlite3/lib/methods/transaction.js', 51) },
    { id: 4, callFrame: frame('run', 'file:///x/.build/src/ledger/group-commit.js', 9), children: [6] },
    { id: 5, callFrame: frame('(idle)') },
    { id: 6, callFrame: frame('write', 'node:net', 100) },
  ],
  samples: [3, 3, 6, 5, 2],
  // The time of sample i is timeDeltas[i + 1] (µs).
  timeDeltas: [0, 3000, 3000, 2000, 10_000, 2000],
};

describe('profile summary', () => {
  it('ranks self and inclusive time over the busy samples, counting a recursive function once', () => {
    const summary = summarise(profile, 10);
    assert.equal(summary.busyMs, 10);
    assert.equal(summary.sampledMs, 20);
    assert.deepEqual(
      summary.self.map((s) => [s.name, s.ms]),
      [
        ['commit npm:better-sqlite3:52', 6],
        ['write node:net:101', 2],
        ['run src/ledger/group-commit.js:10', 2],
      ],
    );
    const run = summary.inclusive.find((s) => s.name.startsWith('run '));
    assert.deepEqual([run?.ms, run?.percent], [10, 100]);
    assert.deepEqual(
      summary.areas.map((s) => [s.name, s.percent]),
      [
        ['npm:better-sqlite3', 60],
        ['node:net', 20],
        ['src/ledger/group-commit.js', 20],
      ],
    );
  });

  it('adds several profiles up (the job processes of a worker)', () => {
    const summary = summarise([profile, profile], 10);
    assert.equal(summary.busyMs, 20);
    assert.equal(summary.sampledMs, 40);
    assert.deepEqual(summary.self[0], { name: 'commit npm:better-sqlite3:52', ms: 12, percent: 60 });
  });

  it('names the area of a frame', () => {
    assert.equal(areaOf(frame('f', 'file:///w/node_modules/@scope/pkg/index.js')), 'npm:@scope/pkg');
    assert.equal(areaOf(frame('f', 'node:internal/streams/writable')), 'node:internal/streams');
    assert.equal(areaOf(frame('(garbage collector)')), '(garbage collector)');
    assert.equal(areaOf(frame('writeUtf8String')), '(native)');
  });

  it('prints the summary of a profile file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'planrun-profile-summary-'));
    try {
      const file = join(dir, 'one.cpuprofile');
      writeFileSync(file, JSON.stringify(profile));
      const script = fileURLToPath(new URL('./profile-summary.js', import.meta.url));
      const out = execFileSync(process.execPath, [script, file, '2'], { encoding: 'utf8' });
      assert.match(out, /10 ms busy of 20 ms sampled/);
      assert.match(out, /60\.0%\s+6 ms {2}commit npm:better-sqlite3:52/);
      const both = execFileSync(process.execPath, [script, file, file], { encoding: 'utf8' });
      assert.match(both, /^2 profiles: 20 ms busy of 40 ms sampled/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
