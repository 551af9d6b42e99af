import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { formatLogLine } from './console-log.js';

const at = new Date(2026, 0, 2, 3, 4, 5).getTime();

describe('console log lines', () => {
  it('turns a pino JSON line into one line for people: time, level, who, message, fields', () => {
    const line = JSON.stringify({
      level: 30,
      time: at,
      pid: 4121,
      hostname: 'h',
      name: 'planrun-worker',
      msg: 'job cancelled; stopping it',
      jobId: 'j-1',
      attempt: 2,
    });
    assert.equal(formatLogLine(line, { color: false }), '03:04:05  INFO   worker 4121  job cancelled; stopping it  jobId=j-1 attempt=2\n');
  });

  it('names the part of the orchestrator, quotes what has spaces, lists lists, and shows an error by its message (its stack at error level)', () => {
    const warn = JSON.stringify({
      level: 40,
      time: at,
      pid: 1,
      name: 'planrun-orchestrator',
      part: 'supervisor',
      msg: 'process exited; restarting',
      process: 'worker-1',
      code: 70,
      types: ['a', 'b'],
      note: 'two words',
    });
    assert.equal(
      formatLogLine(warn, { color: false }),
      '03:04:05  WARN   orchestrator/supervisor  process exited; restarting  process=worker-1 code=70 types=a,b note="two words"\n',
    );
    const error = JSON.stringify({
      level: 50,
      time: at,
      name: 'planrun-worker',
      pid: 7,
      msg: 'job handling failed',
      err: { type: 'Error', message: 'boom', stack: 'Error: boom\n    at x (y.js:1:1)' },
    });
    assert.equal(formatLogLine(error, { color: false }), '03:04:05  ERROR  worker 7  job handling failed  err=boom\n    Error: boom\n    at x (y.js:1:1)\n');
  });

  it('colours on a terminal, and lets a line that is not JSON through unchanged', () => {
    const line = JSON.stringify({ level: 40, time: at, name: 'planrun-worker', pid: 1, msg: 'm' });
    assert.match(formatLogLine(line, { color: true }), /\x1b\[33mWARN \x1b\[0m/);
    assert.equal(formatLogLine('plain text', { color: false }), 'plain text\n');
  });
});
