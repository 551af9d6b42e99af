/**
 * The last measured runs of the fairness row (tools/bench/fairness.ts), which `npm run bench`
 * does not run (each mode needs minutes of an unloaded machine and a RabbitMQ): report.ts
 * renders them into docs/benchmarks.md on every bench run, so the section is not lost when
 * the page is regenerated. After measuring again, replace `runs` with the JSON lines
 * fairness.ts printed (p50/p99 in ms) and update `measured`.
 */
import type { FairnessRun } from './results.js';

export const fairnessMeasurement: { measured: string; conditions: string; runs: FairnessRun[] } = {
  measured: '2026-12-01',
  conditions: 'on the 2-core machine above **while other work loaded it** (load average 10–22 throughout), runs of each mode interleaved',
  runs: [
    { dispatch: 'fifo', aJobs: 5000, bJobs: 50, slots: 32, bSubmitToStartMs: { p50: 28_800, p99: 28_900 }, jobsPerSecond: 166 },
    { dispatch: 'fifo', aJobs: 5000, bJobs: 50, slots: 32, bSubmitToStartMs: { p50: 42_200, p99: 42_500 }, jobsPerSecond: 115 },
    { dispatch: 'fifo', aJobs: 5000, bJobs: 50, slots: 32, bSubmitToStartMs: { p50: 35_500, p99: 35_600 }, jobsPerSecond: 136 },
    { dispatch: 'fifo', aJobs: 5000, bJobs: 50, slots: 32, bSubmitToStartMs: { p50: 29_900, p99: 30_100 }, jobsPerSecond: 161 },
    { dispatch: 'fair', aJobs: 5000, bJobs: 50, slots: 32, bSubmitToStartMs: { p50: 1_150, p99: 1_670 }, jobsPerSecond: 142 },
    { dispatch: 'fair', aJobs: 5000, bJobs: 50, slots: 32, bSubmitToStartMs: { p50: 1_120, p99: 1_740 }, jobsPerSecond: 153 },
    { dispatch: 'fair', aJobs: 5000, bJobs: 50, slots: 32, bSubmitToStartMs: { p50: 1_330, p99: 2_490 }, jobsPerSecond: 117 },
  ],
};
