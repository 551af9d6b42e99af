/**
 * The ledger property test: random interleavings of submissions, lease grants (from outbox
 * work messages, stale and duplicate ones included), renewals, fences, progress, settles
 * (also with stale leases), releases (a worker handing a lease back), cancels, rejections and sweeps while a ManualClock jumps forward,
 * some jumps longer than the lease TTL. A model of what the ledger must do predicts the
 * answer to every call, and after every step the harness checks the invariants that make
 * the exactly-once promise:
 *
 *   - a terminal job never changes again;
 *   - at most one live lease per job, and every lease the simulated workers ever held is
 *     live exactly when the model says it is (nothing from attempt k is accepted once
 *     attempt k+1 was granted or attempt k's lease expired);
 *   - attempts only grow and never pass maxAttempts;
 *   - at most one settle wins per (job, attempt), at most one ends the job;
 *   - a refused call changes nothing;
 *   - once the operations stop, time, the sweeper and finishing workers end every job, and
 *     the outbox holds exactly one result message per job.
 *
 * Both dispatch modes are run: fifo (the work message written at submit and at each
 * requeue) and fair (written by the dispatcher's pass, the sweep op, from one fleet member
 * of FLEET_SLOTS slots per type; its releases are checked: only queued, due, unreleased
 * jobs, within the free slots, and none left waiting beside a free slot). Grants nobody
 * renews within grantWindowMs go back to queued at the same attempt (abandon).
 *
 * Each fast-check run opens its own ledger from the factory (a real database for a real
 * driver), so runs do not share state.
 *
 * Reproducing a failure: fast-check prints the seed and the counterexample path, and this
 * suite appends the command to replay it, e.g.
 *
 *   PLANRUN_PROPERTY_SEED=-1234567 PLANRUN_PROPERTY_PATH="12:3:0" node --test .build/src/ledger/sqlite/sqlite-ledger.test.js
 *
 * Without PLANRUN_PROPERTY_SEED the suite runs a fixed seed, so it is deterministic;
 * PLANRUN_PROPERTY_SEED=random draws a fresh one (printed on failure) and
 * PLANRUN_PROPERTY_RUNS=N changes the number of runs, for longer exploration, and
 * PLANRUN_PROPERTY_STATS=1 prints how often each call got each answer.
 *
 * model.ts holds the operations and the model that predicts and checks every answer,
 * generators.ts the random runs, runner.ts one run's scenario and the parameters taken
 * from the environment; this file declares the test.
 */
import { describe, it } from 'node:test';

import fc from 'fast-check';

import type { DispatchMode } from '../../../src/ledger/ledger.js';
import type { LedgerFactory } from '../testing.js';
import { opsArb } from './generators.js';
import { stats } from './model.js';
import { propertyParameters, runScenario } from './runner.js';

export function ledgerProperties(name: string, factory: LedgerFactory): void {
  describe(`ledger properties: ${name}`, () => {
    for (const dispatch of ['fifo', 'fair'] as const) {
      it(`random interleavings of workers, stale leases, cancels, sweeps and clock jumps keep every ledger invariant (${dispatch} dispatch)`, () =>
        check(name, factory, dispatch));
    }
  });
}

async function check(name: string, factory: LedgerFactory, dispatch: DispatchMode): Promise<void> {
  const params = propertyParameters();
  const details = await fc.check(
    fc.asyncProperty(opsArb, (ops) => runScenario(factory, ops, dispatch)),
    params,
  );
  if (stats) {
    const lines = [...stats].sort(([a], [b]) => a.localeCompare(b)).map(([label, n]) => `  ${label}: ${n}`);
    console.log(`ledger property statistics (${name}, ${dispatch}):\n${lines.join('\n')}`);
  }
  if (details.failed) {
    const report = fc.defaultReportMessage(details) ?? 'property failed';
    const replay = `PLANRUN_PROPERTY_SEED=${details.seed}` + (details.counterexamplePath ? ` PLANRUN_PROPERTY_PATH="${details.counterexamplePath}"` : '');
    const cause = details.errorInstance;
    const why = cause instanceof Error ? (cause.stack ?? cause.message) : String(cause);
    throw new Error(`${report}\n\nReplay with: ${replay} node --test <compiled ledger test>\n\nError of the shrunk counterexample:\n${why}`, {
      cause,
    });
  }
}
