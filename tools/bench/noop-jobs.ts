/**
 * The benchmark's job type: does nothing but say when it started (with the clock every
 * process of the machine shares), so the driver can time submit-to-start from the result.
 */
import { fileURLToPath } from 'node:url';
import { defineJobType } from '../../src/worker/runner/job-type.js';

export const noopJobType = 'bench-noop';

/** This module's path, for a worker's or a pool's `jobModules`. */
export const noopJobsModule = fileURLToPath(import.meta.url);

const noop = defineJobType({
  name: noopJobType,
  outputReserveBytes: 1024,
  run() {
    return { data: { startedAt: performance.timeOrigin + performance.now() } };
  },
});

export default [noop];
