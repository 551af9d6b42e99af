/** The checker's report as text: faults injected, jobs by outcome, each invariant held or violated. */
import type { CheckReport, Violation } from './checker.js';
import type { HistoryEvent } from './history.js';

export interface ReportOptions {
  /** Violations shown per invariant (all are in report.json). */
  maxViolations?: number;
  /** Events shown per violation. */
  maxEvents?: number;
  elapsedMs?: number;
}

export function formatReport(report: CheckReport, options: ReportOptions = {}): string {
  const maxViolations = options.maxViolations ?? 3;
  const maxEvents = options.maxEvents ?? 30;
  const c = report.config;
  const t0 = report.timing.startedAt;
  const lines: string[] = [];
  if (c) {
    lines.push(
      `planrun chaos: seed ${c.seed}; ${c.broker === 'embedded' ? 'embedded broker' : 'RabbitMQ'}; ${c.jobs} jobs; ${(c.durationMs / 1000).toFixed(0)} s of faults; ${c.workers} workers x ${c.slots} slots; ` +
        `lease TTL ${c.leaseTtlMs} ms, ${grantWindow(c.grantWindowMs)}, heartbeat ${c.heartbeatMs} ms, sweep ${c.sweepMs} ms, backoff ${c.backoffMs} ms`,
      `fault schedule ${c.faultFingerprint}, jobs ${c.jobFingerprint}; HTTP submissions ${c.httpAvailable ? 'on' : 'OFF (the API is not in this build: all went over the queue)'}`,
    );
  }
  lines.push('', `Faults injected (${report.faults.length}):`);
  for (const f of report.faults) {
    const duration = f.durationMs === null ? '   ?  ' : `${(f.durationMs / 1000).toFixed(1).padStart(5)}s`;
    const ok = f.ok === null ? 'unhealed' : f.ok ? 'ok' : 'NOT OK';
    lines.push(
      `  #${String(f.id).padEnd(3)} +${(f.atMs / 1000).toFixed(1).padStart(6)}s  ${f.kind.padEnd(22)} ${f.target.padEnd(12)} ${duration}  ${ok.padEnd(8)} ${f.detail ?? ''}`.trimEnd(),
    );
  }
  const jobFaults = Object.entries(report.jobFaults).map(([k, v]) => `${k.replace(/^job /, '')} ${v}`);
  lines.push(`  job code: ${jobFaults.length > 0 ? jobFaults.join(', ') : 'none'}`);

  const j = report.jobs;
  const transports = Object.entries(j.submissions.byTransport)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');
  lines.push(
    '',
    `Jobs: ${j.submitted} keys submitted, ${j.acked} acknowledged (${j.submissions.acked} acked of ${j.submissions.sent} tries: ${transports}; ${j.submissions.repeats} acked repeats); ${j.inLedger} in the ledger`,
    `  ${Object.entries(j.byOutcome)
      .sort()
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}`,
  );
  for (const [behaviour, outcomes] of Object.entries(j.byBehaviour).sort()) {
    lines.push(
      `  ${behaviour.padEnd(13)} ${Object.entries(outcomes)
        .sort()
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')}`,
    );
  }

  const a = report.abandons;
  lines.push(
    `Abandoned grants (taken back at the same attempt, never taken up): ${a.grants}; ${a.ran} of them had started on their worker (stopped once it heard), ${a.refused} requests with their tokens refused`,
  );

  lines.push('', 'Invariants:');
  for (const inv of report.invariants) {
    const status = inv.status === 'held' ? 'held    ' : 'VIOLATED';
    lines.push(`  ${inv.promise.padEnd(4)} ${status} ${inv.id.padEnd(22)} ${String(inv.checked).padStart(6)} checked  ${inv.title}`);
    if (inv.note) lines.push(`${' '.repeat(38)}(${inv.note})`);
    for (const v of inv.violations.slice(0, maxViolations)) {
      lines.push(`       - ${v.message.split('\n').join('\n         ')}`);
      if (v.focus && v.focus.length > 0) {
        lines.push('         the events that show it:');
        for (const e of v.focus) lines.push(`           ${formatEvent(e, t0)}`);
      }
      const { shown, note } = excerpt(v, maxEvents);
      if (shown.length > 0) lines.push(`         the job's history${note}:`);
      for (const e of shown) lines.push(`           ${formatEvent(e, t0)}`);
    }
    if (inv.violations.length > maxViolations) lines.push(`       ... and ${inv.violations.length - maxViolations} more (report.json has them all)`);
  }

  if (report.notices.length > 0) {
    lines.push('', 'Notices:');
    for (const n of report.notices) lines.push(`  - ${n}`);
  }
  const tm = report.timing;
  lines.push(
    '',
    `Timing: last fault healed at +${((tm.lastHealAt - t0) / 1000).toFixed(1)}s; the last job ended ${(tm.maxLagAfterHealMs / 1000).toFixed(1)} s later (liveness bound ${(tm.livenessBoundMs / 1000).toFixed(1)} s)` +
      (options.elapsedMs === undefined ? '' : `; run time ${(options.elapsedMs / 1000).toFixed(1)} s`),
  );
  const violated = report.invariants.filter((i) => i.status === 'violated');
  lines.push(
    violated.length === 0
      ? `PASS: all ${report.invariants.length} invariants held`
      : `FAIL: ${violated.length} of ${report.invariants.length} invariants violated (${violated.map((i) => i.id).join(', ')})`,
  );
  return lines.join('\n');
}

/** The grant window of the run's config (older histories: the ledger's default then, 15 s). */
function grantWindow(ms: number | null | undefined): string {
  if (ms === null) return 'no grant window';
  return `grant window ${ms ?? 15_000} ms`;
}

/** Heartbeats and progress reports drown a job's story; they stay in report.json. */
function isNoise(e: HistoryEvent): boolean {
  if (e.kind === 'control') return e.op === 'heartbeat' || e.op === 'progress';
  if (e.kind === 'worker_event') return e.ev.type === 'progress' || e.ev.type === 'heartbeat';
  return false;
}

/** The job's history without the noise; when still long, the part around the focus events. */
function excerpt(v: Violation, max: number): { shown: HistoryEvent[]; note: string } {
  const quiet = v.events.filter((e) => !isNoise(e));
  if (quiet.length <= max) return { shown: quiet, note: ' (without heartbeats and progress)' };
  const focusTimes = (v.focus ?? []).filter((e) => e.kind !== 'ledger_job').map((e) => e.t);
  if (focusTimes.length > 0) {
    const from = Math.min(...focusTimes) - 5000;
    const to = Math.max(...focusTimes) + 1000;
    const near = quiet.filter((e) => e.t >= from && e.t <= to);
    const shown = near.length <= max ? near : near.slice(-max);
    return { shown, note: ` (${shown.length} of ${v.events.length} events, around the ones above, without heartbeats and progress)` };
  }
  return {
    shown: [...quiet.slice(0, max - 5), ...quiet.slice(-5)],
    note: ` (first ${max - 5} and last 5 of ${quiet.length}, without heartbeats and progress)`,
  };
}

/** One event on one line: time from the start, who, what. */
export function formatEvent(e: HistoryEvent, t0: number): string {
  const at = `+${((e.t - t0) / 1000).toFixed(3)}s`.padStart(10);
  const who = `${e.src}/${e.pid}`.padEnd(20);
  return `${at} ${who} ${describe(e)}`;
}

function describe(e: HistoryEvent): string {
  switch (e.kind) {
    case 'submit':
      return `submit ${e.tenant}/${e.key} over ${e.transport} copy ${e.copy} try ${e.retry}: ${e.acked ? 'acked' : `NOT acked (${e.error})`} [${e.input.behaviour}]`;
    case 'control': {
      const req = e.req as { jobId?: string; attempt?: number; worker?: string; leases?: unknown[] };
      const target = req.jobId ? ` ${req.jobId}@${req.attempt}` : ` ${req.worker} (${req.leases?.length ?? 0} leases)`;
      return `control ${e.op}${target} -> ${JSON.stringify(e.ans).slice(0, 160)}`;
    }
    case 'publish':
      return `publish ${e.to}${e.routingKey ? ` ${e.routingKey}` : ''} id ${e.messageId}: ${e.ok ? 'confirmed' : `failed (${e.error})`}`;
    case 'worker_event': {
      const { type, ...rest } = e.ev as { type: string } & Record<string, unknown>;
      return `${type} ${JSON.stringify(rest).slice(0, 160)}`;
    }
    case 'delivery':
      return `delivery from ${e.queue} id ${e.messageId}${e.redelivered ? ' (redelivered)' : ''}`;
    case 'result':
      return `result received id ${e.messageId} ${e.routingKey} ${e.body.state}@${e.body.attempt}${e.redelivered ? ' (redelivered)' : ''}`;
    case 'run_start':
      return `run start ${e.jobId}@${e.attempt} (${e.behaviour}) under worker pid ${e.ppid}`;
    case 'run_output':
      return `run wrote ${e.bytes} bytes ${e.sha256.slice(0, 12)} for ${e.jobId}@${e.attempt}`;
    case 'run_raise':
      return `run raises ${e.class} in ${e.jobId}@${e.attempt}`;
    case 'run_hang':
      return `run hangs ${e.ms} ms in ${e.jobId}@${e.attempt}`;
    case 'ledger_job': {
      const { job, attempts } = e;
      const state = job.state === 'failed' ? `failed/${job.failureReason}` : job.state;
      return `ledger: ${state}@${job.attempt}/${job.maxAttempts}; attempts ${attempts.map((a) => `${a.attempt}:${a.outcome ?? 'open'}(${a.worker.split('-').slice(-2).join('-')})`).join(' ')}`;
    }
    case 'stored_output':
      return `stored output ${e.name} at ${e.path}: ${e.exists ? `${e.bytes} bytes ${e.sha256?.slice(0, 12)}` : 'MISSING'}`;
    case 'proc_exit':
      return `${e.name} pid ${e.child} exited code ${e.code} signal ${e.signal} (${e.cause})`;
    case 'proc_start':
    case 'proc_ready':
      return `${e.kind} ${e.name} pid ${e.child}`;
    case 'fault_start':
    case 'fault_end':
      return `${e.kind} #${e.fault} ${e.fault_kind} ${e.target}${e.detail ? ` (${e.detail})` : ''}`;
    default: {
      const { t: _t, src: _src, pid: _pid, kind, ...rest } = e as HistoryEvent & Record<string, unknown>;
      return `${kind} ${JSON.stringify(rest).slice(0, 160)}`;
    }
  }
}
