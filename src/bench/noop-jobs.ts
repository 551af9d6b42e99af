/**
 * The benchmark's job type: does nothing but say when it started (with the clock every
 * process of the machine shares), so the driver can time submit-to-start from the result.
 */
import { defineJobType } from '../worker/runner/job-type.js';

export const noopJobType = 'bench-noop';

const noop = defineJobType({
  name: noopJobType,
  outputReserveBytes: 1024,
  run() {
    return { data: { startedAt: performance.timeOrigin + performance.now() } };
  },
});

export default [noop];
