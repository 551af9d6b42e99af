import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { fairnessMeasurement } from './fairness-runs.js';
import { renderFairness } from './report.js';

describe('bench report: the fairness section', () => {
  it('renders the last measured runs per dispatch mode, with each mode mean and the difference', () => {
    const section = renderFairness(fairnessMeasurement);
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
    assert.match(section, /measured 2026-12-01/);
  });

  it('refuses to render without a run', () => {
    assert.throws(() => renderFairness({ measured: 'x', conditions: 'y', runs: [] }), /at least one measured run/);
  });
});
