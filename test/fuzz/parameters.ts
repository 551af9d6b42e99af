import type { Parameters } from 'fast-check';

/**
 * The run parameters of a fuzz property: a fixed number of runs, so the run time is
 * bounded, and a seed that is printed, so a failure can be replayed exactly with
 * `PLANRUN_FUZZ_SEED=<seed>` (and `PLANRUN_FUZZ_PATH=<path>` for the shrunk case, both as
 * fast-check prints them when a property fails).
 */
export function fuzzParameters<T>(name: string, numRuns: number): Parameters<T> {
  const seed = process.env.PLANRUN_FUZZ_SEED === undefined ? Date.now() ^ (Math.random() * 0x100000000) : Number(process.env.PLANRUN_FUZZ_SEED);
  const path = process.env.PLANRUN_FUZZ_PATH;
  console.log(`# fuzz ${name}: ${numRuns} runs, seed ${seed} (replay with PLANRUN_FUZZ_SEED=${seed})`);
  return { seed, numRuns, ...(path === undefined ? {} : { path }), endOnFailure: true };
}
