/**
 * The fleet in the ledger (issue 12): every orchestrator sharing the ledger records the
 * heartbeats it answers and reads the fleet the others heard.
 *
 *   heartbeat(report, proof, window, leases) -> the report recorded, unless another process
 *                                              holds the worker's name (another proof heard
 *                                              within the window); then its leases renewed,
 *                                              all in the heartbeat's one transaction
 *   listFleet(window)                        -> the workers heard from within the window
 */
import { LedgerError } from '../errors.js';
import type { FleetRecord, HeartbeatParams, HeartbeatResult } from '../ledger.js';
import { run, type OperationEnv, type Plan } from './plan.js';
import { renewLeases } from './renew-leases.js';

export function* heartbeat(params: HeartbeatParams, env: OperationEnv): Plan<HeartbeatResult> {
  const { report, proof, windowMs } = params;
  requireWindow(windowMs);
  if (typeof report.worker !== 'string' || report.worker.length === 0) throw new LedgerError('invalid_input', 'the worker must be a non-empty string');
  if (typeof proof !== 'string' || proof.length === 0) throw new LedgerError('invalid_input', 'the proof must be a non-empty string');
  if (report.worker !== params.worker) throw new LedgerError('invalid_input', "the report must be the heartbeat's worker's");
  if (!(yield* run('upsertFleetMember', { report, proof, now: env.now, freeBefore: env.now - windowMs }))) return { recorded: false };
  return { recorded: true, heardAt: env.now, ...(yield* renewLeases(params, env)) };
}

export function* listFleet({ windowMs }: { windowMs: number }, { now }: OperationEnv): Plan<FleetRecord[]> {
  requireWindow(windowMs);
  return yield* run('selectFleet', { heardSince: now - windowMs });
}

function requireWindow(windowMs: number): void {
  if (!Number.isInteger(windowMs) || windowMs < 1) throw new LedgerError('invalid_input', 'windowMs must be a whole number of milliseconds >= 1');
}
