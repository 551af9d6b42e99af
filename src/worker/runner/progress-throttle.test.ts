import assert from 'node:assert/strict';
import { afterEach, beforeEach, mock, test } from 'node:test';
import { ProgressThrottle, type ProgressReport } from './progress-throttle.js';

let now = 0;
let emitted: Array<ProgressReport & { at: number }>;
let throttle: ProgressThrottle;

/** Moves the clock the throttle reads and the timers it sets together. */
function advance(ms: number): void {
  now += ms;
  mock.timers.tick(ms);
}

afterEach(() => mock.timers.reset());
beforeEach(() => {
  now = 0;
  emitted = [];
  mock.timers.enable({ apis: ['setTimeout'] });
  throttle = new ProgressThrottle(
    1000,
    (report) => emitted.push({ ...report, at: now }),
    () => now,
  );
});

test('the first report passes at once', () => {
  throttle.report({ fraction: 0.1, message: 'start' });
  assert.deepEqual(emitted, [{ fraction: 0.1, message: 'start', at: 0 }]);
});

test('reports within the interval collapse into the newest, sent when the interval ends', () => {
  throttle.report({ fraction: 0.1 });
  advance(100);
  throttle.report({ fraction: 0.2 });
  advance(100);
  throttle.report({ fraction: 0.3 });
  assert.equal(emitted.length, 1);
  advance(799);
  assert.equal(emitted.length, 1);
  advance(1);
  assert.deepEqual(emitted, [
    { fraction: 0.1, at: 0 },
    { fraction: 0.3, at: 1000 },
  ]);
});

test('a report after a quiet interval passes at once', () => {
  throttle.report({ fraction: 0.1 });
  advance(5000);
  throttle.report({ fraction: 0.5 });
  assert.deepEqual(emitted, [
    { fraction: 0.1, at: 0 },
    { fraction: 0.5, at: 5000 },
  ]);
});

test('close() sends the report still waiting, so the last one is never lost', () => {
  throttle.report({ fraction: 0.1 });
  throttle.report({ fraction: 1, message: 'done' });
  throttle.close();
  assert.deepEqual(emitted, [
    { fraction: 0.1, at: 0 },
    { fraction: 1, message: 'done', at: 0 },
  ]);
  advance(2000);
  assert.equal(emitted.length, 2, 'the cancelled timer sends nothing more');
});

test('reports after close() are dropped', () => {
  throttle.close();
  throttle.report({ fraction: 0.5 });
  advance(2000);
  assert.deepEqual(emitted, []);
});

test('an interval of 0 lets every report through', () => {
  const all: ProgressReport[] = [];
  const unthrottled = new ProgressThrottle(
    0,
    (report) => all.push(report),
    () => now,
  );
  for (const fraction of [0.1, 0.2, 0.3]) unthrottled.report({ fraction });
  assert.deepEqual(all, [{ fraction: 0.1 }, { fraction: 0.2 }, { fraction: 0.3 }]);
});
