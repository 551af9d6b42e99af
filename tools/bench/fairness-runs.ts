/**
 * The last measured runs of the fairness row (tools/bench/fairness.ts), which `npm run bench`
 * does not run (each mode needs minutes of an unloaded machine and a RabbitMQ): report.ts
 * renders them into docs/benchmarks.md on every bench run, so the section is not lost when
 * the page is regenerated. After measuring again, replace `runs` with the JSON lines
 * fairness.ts printed (p50/p99 in ms) and update `measured`.
 */
import type { FairnessRun } from './results.js';

export const fairnessMeasurement: { measured: string; conditions: string; runs: FairnessRun[] } = {
  measured: '2026-12-02',
  conditions:
    'on the 2-core machine above with nothing else running (the load average of 5–12 during the runs is the benchmark itself), runs of each mode interleaved',
  runs: [
    { dispatch: 'fifo', aJobs: 5000, bJobs: 50, slots: 32, bSubmitToStartMs: { p50: 12_594, p99: 12_657 }, jobsPerSecond: 389 },
    { dispatch: 'fifo', aJobs: 5000, bJobs: 50, slots: 32, bSubmitToStartMs: { p50: 13_352, p99: 13_420 }, jobsPerSecond: 365 },
    { dispatch: 'fair', aJobs: 5000, bJobs: 50, slots: 32, bSubmitToStartMs: { p50: 272, p99: 425 }, jobsPerSecond: 365 },
    { dispatch: 'fair', aJobs: 5000, bJobs: 50, slots: 32, bSubmitToStartMs: { p50: 224, p99: 432 }, jobsPerSecond: 393 },
  ],
};
