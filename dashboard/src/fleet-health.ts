/**
 * Whether a worker has gone quiet. The API says when each worker last heartbeat, not how
 * often it does (`--heartbeat-interval`, 30 s by default): the dashboard learns each
 * worker's cadence from the heartbeats it sees change, and calls a worker quiet once it
 * has missed a few. A worker whose cadence is not seen yet (one that stopped before the page
 * opened) is judged by the fleet's quickest (workers of one fleet mostly share a setting),
 * and with none seen, by the default interval.
 */
import type { FleetWorker } from './api.js';

const defaultIntervalMs = 30_000;
/** Heartbeats missed before a worker is shown as quiet (a lease survives about three). */
const missedBeats = 2.5;

const seen = new Map<string, { last: number; intervalMs?: number }>();

/** Takes in a fleet answer: each worker's latest heartbeat, and the gap since the one before. */
export function observeFleet(workers: readonly FleetWorker[]): void {
  for (const worker of workers) {
    const last = Date.parse(worker.lastHeartbeat);
    const known = seen.get(worker.id);
    if (!known) seen.set(worker.id, { last });
    else if (last > known.last) seen.set(worker.id, { last, intervalMs: Math.min(known.intervalMs ?? Infinity, last - known.last) });
  }
}

export function isQuiet(worker: FleetWorker, now: number): boolean {
  const fleetIntervals = [...seen.values()].flatMap((w) => (w.intervalMs === undefined ? [] : [w.intervalMs]));
  const intervalMs = seen.get(worker.id)?.intervalMs ?? (fleetIntervals.length > 0 ? Math.min(...fleetIntervals) : defaultIntervalMs);
  return now - Date.parse(worker.lastHeartbeat) > missedBeats * intervalMs;
}
