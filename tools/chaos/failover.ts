/**
 * The failover figures of a run with several orchestrators and a RabbitMQ cluster
 * (`--profile ha`), measured from the merged history:
 *
 * - after each SIGKILL of an orchestrator, the longest gap in job starts and settles:
 *   from the kill, the longest time in the next `windowMs` with no attempt starting
 *   (`run_start`, from the job processes) and no settle accepted (by any orchestrator).
 *   The others take over the control plane at once (RabbitMQ hands them the requests);
 *   what a kill costs is the control requests the dead one held, which their workers
 *   send again after `--control-timeout`.
 * - after each kill or restart of a RabbitMQ node, the submissions the broker confirmed
 *   from the fault's start until a few seconds after its heal, and how many of them the
 *   final ledger lacks (lost: 0 is the promise, which `no-loss` holds over the whole run).
 */
import type { HistoryEvent } from './history.js';

export interface OrchestratorKillFigure {
  fault: number;
  target: string;
  /** The longest time without a job start or an accepted settle in the window after the kill. */
  longestGapMs: number;
  /** Job starts and accepted settles in that window. */
  activity: number;
}

export interface BrokerNodeFigure {
  fault: number;
  kind: string;
  target: string;
  /** Submissions over the queue that the broker confirmed during the fault (and just after its heal). */
  confirmed: number;
  /** Of those, how many the final ledger has no job for. */
  lost: number;
}

export interface FailoverReport {
  windowMs: number;
  orchestratorKills: OrchestratorKillFigure[];
  /** The longest of the gaps above (0 when no orchestrator was killed). */
  longestGapMs: number;
  brokerNodeFaults: BrokerNodeFigure[];
  confirmedLost: number;
}

/** How long after a kill the gap is looked for. */
const defaultWindowMs = 15_000;
/** After a node's heal, how long confirmed submissions still count as "around" its fault. */
const afterHealMs = 5000;

export function measureFailover(history: readonly HistoryEvent[], windowMs = defaultWindowMs): FailoverReport {
  const activity = history
    .filter((e) => e.kind === 'run_start' || (e.kind === 'control' && e.op === 'settle' && e.ans.accepted === true))
    .map((e) => e.t)
    .sort((a, b) => a - b);
  const ends = new Map<number, number>();
  for (const e of history) if (e.kind === 'fault_end') ends.set(e.fault, e.t);
  const inLedger = new Set<string>();
  for (const e of history) {
    if (e.kind === 'ledger_job' && e.job.idempotencyKey !== null) inLedger.add(`${e.job.tenant}\u0000${e.job.idempotencyKey}`);
  }

  const orchestratorKills: OrchestratorKillFigure[] = [];
  const brokerNodeFaults: BrokerNodeFigure[] = [];
  for (const e of history) {
    if (e.kind !== 'fault_start') continue;
    if (e.fault_kind === 'orchestrator-kill') {
      const until = e.t + windowMs;
      const within = activity.filter((t) => t > e.t && t <= until);
      let longest = 0;
      let previous = e.t;
      for (const t of [...within, until]) {
        longest = Math.max(longest, t - previous);
        previous = t;
      }
      orchestratorKills.push({ fault: e.fault, target: e.target, longestGapMs: longest, activity: within.length });
    } else if (e.fault_kind === 'broker-kill' || e.fault_kind === 'broker-restart') {
      const until = (ends.get(e.fault) ?? Infinity) + afterHealMs;
      const confirmed = history.filter((s) => s.kind === 'submit' && s.transport === 'queue' && s.acked && s.t >= e.t && s.t <= until);
      const lost = confirmed.filter((s) => s.kind === 'submit' && !inLedger.has(`${s.tenant}\u0000${s.key}`)).length;
      brokerNodeFaults.push({ fault: e.fault, kind: e.fault_kind, target: e.target, confirmed: confirmed.length, lost });
    }
  }
  return {
    windowMs,
    orchestratorKills,
    longestGapMs: Math.max(0, ...orchestratorKills.map((k) => k.longestGapMs)),
    brokerNodeFaults,
    confirmedLost: brokerNodeFaults.reduce((n, f) => n + f.lost, 0),
  };
}

/** The report's lines for the figures. */
export function formatFailover(report: FailoverReport): string {
  const lines = ['failover (several orchestrators, a RabbitMQ cluster):'];
  for (const k of report.orchestratorKills) {
    lines.push(
      `  orchestrator-kill #${k.fault} ${k.target}: longest gap in job starts and settles ${(k.longestGapMs / 1000).toFixed(2)} s (${k.activity} in the ${report.windowMs / 1000} s after the kill)`,
    );
  }
  if (report.orchestratorKills.length === 0) lines.push('  no orchestrator was killed');
  for (const f of report.brokerNodeFaults) {
    lines.push(`  ${f.kind} #${f.fault} ${f.target}: ${f.confirmed} submissions confirmed during it (and ${afterHealMs / 1000} s after), ${f.lost} lost`);
  }
  lines.push(
    `  longest gap after an orchestrator's SIGKILL: ${(report.longestGapMs / 1000).toFixed(2)} s; confirmed submissions lost around RabbitMQ node faults: ${report.confirmedLost}`,
  );
  return lines.join('\n');
}
