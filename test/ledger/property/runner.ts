/** The runner of the ledger property test: one scenario per fast-check run, and the parameters (seed, path, runs) from the environment. */
import assert from 'node:assert/strict';

import type fc from 'fast-check';

import { ManualClock } from '../../../src/core/clock.js';
import type { DispatchMode } from '../../../src/ledger/ledger.js';
import { proofOf, type LedgerFactory } from '../testing.js';
import { FLEET_SLOTS, FLEET_WINDOW_MS, propertyConfig, Simulation, TYPES, type Op } from './model.js';

const DEFAULT_SEED = 20_260_101;
const DEFAULT_RUNS = 50;

export async function runScenario(factory: LedgerFactory, ops: readonly Op[], dispatch: DispatchMode): Promise<void> {
  const clock = new ManualClock();
  const config = { ...propertyConfig, dispatch };
  const ledger = await factory({ clock, config });
  const sim = new Simulation(ledger, clock, config);
  sim.holds.set('finisher', []);
  let current = 'setup';
  try {
    if (dispatch === 'fair') {
      // The fleet the dispatcher counts slots from: heard once, within the window for the whole run.
      const report = { worker: 'fleet', jobTypes: [...TYPES], capabilities: [], heldBack: [], slots: FLEET_SLOTS, running: 0 };
      const heard = await ledger.heartbeat({ worker: 'fleet', report, proof: proofOf('fleet'), windowMs: FLEET_WINDOW_MS, leases: [] });
      assert.ok(heard.recorded, 'the fleet member is recorded');
    }
    for (const op of ops) {
      sim.step += 1;
      current = JSON.stringify(op);
      await sim.apply(op);
      await sim.checkInvariants();
    }
    current = 'drain to the end';
    await sim.drainToEnd();
  } catch (err) {
    const trace = sim.trace.slice(-25).join('\n  ');
    const message = err instanceof Error ? err.message : String(err);
    throw new Error(`at step #${sim.step} (${current}): ${message}\n  last steps:\n  ${trace}`, { cause: err });
  } finally {
    await ledger.close();
  }
}

export function propertyParameters(): fc.Parameters<[Op[]]> {
  const seedEnv = process.env.PLANRUN_PROPERTY_SEED;
  const pathEnv = process.env.PLANRUN_PROPERTY_PATH;
  const runsEnv = process.env.PLANRUN_PROPERTY_RUNS;
  const seed =
    seedEnv === undefined || seedEnv === '' ? DEFAULT_SEED : seedEnv === 'random' ? (Date.now() ^ (Math.random() * 0x1_0000_0000)) | 0 : Number(seedEnv);
  assert.ok(Number.isInteger(seed), `PLANRUN_PROPERTY_SEED must be an integer or "random", got ${seedEnv}`);
  const numRuns = runsEnv ? Number(runsEnv) : DEFAULT_RUNS;
  assert.ok(Number.isInteger(numRuns) && numRuns > 0, `PLANRUN_PROPERTY_RUNS must be a positive integer, got ${runsEnv}`);
  const params: fc.Parameters<[Op[]]> = { seed, numRuns, interruptAfterTimeLimit: 240_000, markInterruptAsFailure: true };
  if (pathEnv) params.path = pathEnv;
  return params;
}
