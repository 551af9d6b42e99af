import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { renderFairness } from './report.js';
import type { FairnessRun } from './results.js';

/** Runs as fairness.ts prints them (the ones fairness-runs.ts held on 2026-12-01), so the test does not follow each new measurement. */
const run = (dispatch: FairnessRun['dispatch'], p50: number, p99: number, jobsPerSecond: number): FairnessRun => ({
  dispatch,
  aJobs: 5000,
  bJobs: 50,
  slots: 32,
  bSubmitToStartMs: { p50, p99 },
  jobsPerSecond,
});
const measurement = {
  measured: '2026-12-01',
  conditions: 'on a loaded machine',
  runs: [
    run('fifo', 28_800, 28_900, 166),
    run('fifo', 42_200, 42_500, 115),
    run('fifo', 35_500, 35_600, 136),
    run('fifo', 29_900, 30_100, 161),
    run('fair', 1_150, 1_670, 142),
    run('fair', 1_120, 1_740, 153),
    run('fair', 1_330, 2_490, 117),
  ],
};

describe('bench report: the fairness section', () => {
  it('renders the last measured runs per dispatch mode, with each mode mean and the difference', () => {
    const section = renderFairness(measurement);
    assert.match(section, /^## Fairness: fair dispatch against FIFO \(issue 15\)/);
    assert.match(
      section,
      /\| fifo \(work message at submit\) \| 4 \| 28\.8 \/ 42\.2 \/ 35\.5 \/ 29\.9 s \| 28\.9 \/ 42\.5 \/ 35\.6 \/ 30\.1 s \| 166 \/ 115 \/ 136 \/ 161 jobs\/s \(mean 145\) \|/,
    );
    assert.match(
      section,
      /\| fair \(one round per slot ahead\) \| 3 \| 1\.15 \/ 1\.12 \/ 1\.33 s \| 1\.67 \/ 1\.74 \/ 2\.49 s \| 142 \/ 153 \/ 117 jobs\/s \(mean 137\) \|/,
    );
    assert.match(section, /whole run \(5,050 jobs\)/);
    assert.match(section, /\(mean -5%\)/);
    assert.match(section, /measured 2026-12-01 on a loaded machine/);
  });

  it('refuses to render without a run', () => {
    assert.throws(() => renderFairness({ measured: 'x', conditions: 'y', runs: [] }), /at least one measured run/);
  });
});
