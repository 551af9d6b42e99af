import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { cliPath } from '../../test/testing/worker-process.js';

describe('planrun demo', () => {
  it('takes --prefix; runs transcodes, kills a worker mid-run, and ends with every job final and one result message each', () => {
    const prefix = `demo-test-${process.pid}`;
    const run = spawnSync(process.execPath, [cliPath, 'demo', '--jobs', '2', '--broken', '1', '--clip-seconds', '4', '--prefix', prefix], {
      encoding: 'utf8',
      timeout: 120_000,
    });
    assert.equal(run.status, 0, `${run.stdout}\n${run.stderr}`);
    assert.match(run.stdout, new RegExp(`^planrun demo: API http://127\\.0\\.0\\.1:\\d+, broker embedded \\(.*\\) \\(prefix ${prefix}\\), data in `));
    assert.match(run.stdout, /killing worker .* with SIGKILL/);
    assert.match(run.stdout, /failed\/permanent\s+1:failed\s+1/);
    assert.match(run.stdout, /1:expired 2:finished\s+1/);
    assert.match(run.stdout, /each with exactly one result message/);
  });
});
