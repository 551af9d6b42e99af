/**
 * How the client commands show jobs: a summary, a table, the final state, and a live
 * progress line on stderr (redrawn in place on a terminal, one line per change when
 * stderr is a file or a pipe).
 */
import type { FleetWorker, JobEvent, JobSummary, JobView } from '../client/types.js';

export function formatPercent(progress: number | null | undefined): string {
  if (progress === null || progress === undefined) return '';
  return `${Math.floor(Math.min(1, Math.max(0, progress)) * 100)}%`;
}

export function progressBar(progress: number | null | undefined, width = 24): string {
  const fraction = Math.min(1, Math.max(0, progress ?? 0));
  const filled = Math.round(fraction * width);
  return `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}]`;
}

export function stateLabel(job: Pick<JobSummary, 'state' | 'reason'>): string {
  return job.state === 'failed' && job.reason ? `failed (${job.reason})` : job.state;
}

export function attemptLabel(job: Pick<JobSummary, 'attempt' | 'maxAttempts'>): string {
  return `attempt ${job.attempt}/${job.maxAttempts}`;
}

export function shortTime(iso: string | null | undefined): string {
  if (!iso) return '-';
  const date = new Date(iso);
  return Number.isNaN(date.getTime())
    ? iso
    : date
        .toISOString()
        .replace('T', ' ')
        .replace(/\.\d+Z$/, 'Z');
}

function elapsed(fromIso: string | null, toIso: string | null): string {
  const ms = fromIso && toIso ? Date.parse(toIso) - Date.parse(fromIso) : Number.NaN;
  if (!Number.isFinite(ms) || ms < 0) return '';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 120_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

/** Progress is shown while an attempt runs; a finished job is done, a failed one's last figure would mislead. */
function shownProgress(job: Pick<JobSummary, 'state' | 'progress'>): string {
  if (job.state === 'finished') return '100%';
  if (job.state === 'running') return formatPercent(job.progress) || '0%';
  return '-';
}

/** Columns padded to their widest cell. */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((cell, i) => Math.max(cell.length, ...rows.map((row) => (row[i] ?? '').length)));
  const line = (row: string[]) =>
    row
      .map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}

/** `planrun status`: what a person wants to know about one job. */
export function formatJob(job: JobView): string {
  const lines: Array<[string, string]> = [
    ['job', job.id],
    ['type', job.type],
    ['tenant', job.tenant],
    ['state', `${stateLabel(job)}, ${attemptLabel(job)}`],
  ];
  if (job.requires.length > 0) lines.push(['requires', job.requires.join(', ')]);
  if (job.state === 'running') {
    lines.push(['progress', `${progressBar(job.progress)} ${shownProgress(job)}${job.progressMessage ? `  ${job.progressMessage}` : ''}`]);
  }
  if (job.cancelRequested && job.state === 'running') lines.push(['cancel', 'requested; the worker stops it at its next heartbeat']);
  lines.push(['created', shortTime(job.createdAt)]);
  if (job.startedAt) lines.push(['started', shortTime(job.startedAt)]);
  if (job.endedAt) lines.push(['ended', `${shortTime(job.endedAt)} (${elapsed(job.createdAt, job.endedAt)} after submission)`]);
  else lines.push(['updated', shortTime(job.updatedAt)]);
  if (job.result?.data !== undefined) lines.push(['result', JSON.stringify(job.result.data)]);
  for (const [name, location] of Object.entries(job.result?.outputs ?? {})) {
    lines.push(['output', `${name}  ${location}`]);
    const file = job.result?.outputFiles?.[name];
    if (file?.sha256 !== undefined) lines.push(['', `${file.bytes} bytes  sha256 ${file.sha256}`]);
  }
  if (job.error) lines.push(['error', `${job.error.code} (${job.error.class}): ${job.error.message}`]);
  // The job's last words: with them a crash usually explains itself (all of it: planrun logs <id>).
  for (const [i, line] of (job.error?.logTail?.split('\n') ?? []).entries()) lines.push([i === 0 ? 'log tail' : '', line]);
  // Absent from a server older than redrive.
  if (job.retryOf) lines.push(['retry of', job.retryOf]);
  if (job.retriedBy) lines.push(['retried', `as ${job.retriedBy}`]);
  const width = Math.max(...lines.map(([label]) => label.length));
  const out = lines.map(([label, value]) => `${label.padEnd(width)}  ${value}`);
  const attempts = job.attempts ?? [];
  if (attempts.length > 0) {
    out.push(
      '',
      table(
        ['ATTEMPT', 'WORKER', 'STARTED', 'ENDED', 'OUTCOME', 'ERROR'],
        attempts.map((a) => [
          String(a.attempt),
          a.worker,
          shortTime(a.startedAt),
          shortTime(a.endedAt),
          a.outcome ?? (a.endedAt ? '-' : 'running'),
          a.error ? `${a.error.code}: ${a.error.message}` : '',
        ]),
      ),
    );
  }
  return out.join('\n');
}

/** `planrun jobs`: one row per job. */
export function formatJobTable(jobs: JobSummary[]): string {
  if (jobs.length === 0) return 'no jobs';
  return table(
    ['ID', 'TYPE', 'STATE', 'ATTEMPT', 'PROGRESS', 'UPDATED'],
    jobs.map((job) => [job.id, job.type, stateLabel(job), `${job.attempt}/${job.maxAttempts}`, shownProgress(job), shortTime(job.updatedAt)]),
  );
}

/** `planrun submit` without --wait: the job as it stands right after the submission. */
export function formatSubmitted(job: JobSummary): string {
  const lines = [`${job.id} ${stateLabel(job)}, ${attemptLabel(job)}`];
  if (job.error) lines.push(`error: ${job.error.code} (${job.error.class}): ${job.error.message}`);
  return lines.join('\n');
}

/** How long ago, for a person: `4 s ago`, `3 min ago`. */
function ago(iso: string, now: number): string {
  const ms = now - Date.parse(iso);
  if (!Number.isFinite(ms)) return iso;
  if (ms < 1000) return 'just now';
  if (ms < 120_000) return `${Math.floor(ms / 1000)} s ago`;
  if (ms < 2 * 3_600_000) return `${Math.floor(ms / 60_000)} min ago`;
  return `${Math.floor(ms / 3_600_000)} h ago`;
}

/** `planrun fleet`: one row per worker heard from lately. */
export function formatFleetTable(workers: FleetWorker[], now = Date.now()): string {
  return table(
    ['WORKER', 'RUNNING', 'JOB TYPES', 'CAPABILITIES', 'LAST HEARTBEAT'],
    workers.map((worker) => [
      worker.id,
      `${worker.running}/${worker.slots}`,
      worker.jobTypes.join(',') || '-',
      worker.capabilities.join(',') || '-',
      ago(worker.lastHeartbeat, now),
    ]),
  );
}

/** What `submit --wait` and `watch` print once the job has ended. */
export function formatFinal(job: JobView): string {
  const took = elapsed(job.createdAt, job.endedAt);
  const lines = [`${job.id} ${stateLabel(job)}, ${attemptLabel(job)}${took ? `, ${took} after submission` : ''}`];
  if (job.result?.data !== undefined) lines.push(`result: ${JSON.stringify(job.result.data)}`);
  for (const [name, location] of Object.entries(job.result?.outputs ?? {})) {
    const file = job.result?.outputFiles?.[name];
    // The output line stays `output: NAME LOCATION` (scripts read it); size and digest follow on their own line.
    lines.push(`output: ${name} ${location}`);
    if (file?.sha256 !== undefined) lines.push(`        ${file.bytes} bytes  sha256 ${file.sha256}`);
  }
  if (job.error) lines.push(`error: ${job.error.code} (${job.error.class}): ${job.error.message}`);
  return lines.join('\n');
}

/**
 * The live progress line. On a terminal it redraws one line in place (at most every
 * `redrawMs`); otherwise it writes a line whenever the state, the attempt, the whole
 * percentage or the message changes.
 */
export class ProgressDisplay {
  private shown: JobSummary | undefined;
  private lastLine = '';
  private lastDraw = 0;
  private pending: NodeJS.Timeout | undefined;
  private readonly tty: boolean;

  constructor(
    private readonly out: NodeJS.WriteStream,
    private readonly redrawMs = 100,
  ) {
    this.tty = Boolean(out.isTTY);
  }

  update(event: JobEvent): void {
    this.shown = event.job;
    this.render();
  }

  /** Draws the last state for good and leaves the line. */
  finish(): void {
    clearTimeout(this.pending);
    this.pending = undefined;
    if (this.tty && this.shown) {
      this.draw();
      this.out.write('\n');
    }
  }

  private render(): void {
    if (!this.tty) {
      const line = this.line();
      if (line !== this.lastLine) this.out.write(`${line}\n`);
      this.lastLine = line;
      return;
    }
    const wait = this.lastDraw + this.redrawMs - Date.now();
    if (wait <= 0) {
      this.draw();
    } else if (!this.pending) {
      this.pending = setTimeout(() => {
        this.pending = undefined;
        this.draw();
      }, wait);
    }
  }

  private draw(): void {
    this.lastDraw = Date.now();
    const columns = this.out.columns || 80;
    const line = this.terminalLine(Math.min(30, Math.max(10, columns - 60))).slice(0, columns - 1);
    if (line !== this.lastLine) this.out.write(`\r\x1b[2K${line}`);
    this.lastLine = line;
  }

  /** On a terminal the id is left out (the command line or the line above shows it) to leave room for the bar. */
  private terminalLine(barWidth: number): string {
    const job = this.shown!;
    const parts = [stateLabel(job)];
    if (job.state === 'running') parts.push(`${shownProgress(job).padStart(4)} ${progressBar(job.progress, barWidth)}`);
    parts.push(attemptLabel(job));
    if (job.state === 'running' && job.cancelRequested) parts.push('(cancelling)');
    if (job.state === 'running' && job.progressMessage) parts.push(job.progressMessage);
    return parts.join('  ');
  }

  /** A line of a log: the id, the state, the attempt, the progress while running. */
  private line(): string {
    const job = this.shown!;
    const parts = [job.id, stateLabel(job), attemptLabel(job)];
    if (job.state === 'running') {
      parts.push(shownProgress(job));
      if (job.progressMessage) parts.push(job.progressMessage);
      if (job.cancelRequested) parts.push('(cancelling)');
    }
    return parts.join('  ');
  }
}
