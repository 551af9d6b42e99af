/**
 * The overview: how many jobs stand in each state (by type) and how long the oldest queued
 * one has waited, finished and failed jobs per minute over the last hour (read from the
 * ledger through the jobs list, so it has history after a restart), queued and running
 * jobs over time (sampled while the page is open), and how much of the fleet is busy.
 */
import { useMemo } from 'react';
import { Link } from 'wouter';
import type { JobPage, JobState } from '../api.js';
import { Chart } from '../components/Chart.js';
import { FailureNotice } from '../components/Notice.js';
import { isQuiet } from '../fleet-health.js';
import { countLimit, useFleet, useJobPage } from '../queries.js';

const states: JobState[] = ['queued', 'running', 'finished', 'failed'];
const minute = 60_000;
const minutes = 60;

/** Queued and running counts as read, kept across visits to the page while the tab is open (the last hour of them). */
const depthSamples: Array<{ at: number; queued: number; running: number }> = [];

/** Adds the counts read at `at`, once (a render that reads the same answers again adds nothing). */
function sampleDepth(queued: JobPage, running: JobPage, at: number): void {
  if (at <= (depthSamples.at(-1)?.at ?? 0)) return;
  depthSamples.push({ at, queued: queued.jobs.length, running: running.jobs.length });
  while (depthSamples.length > 0 && depthSamples[0]!.at < at - minutes * minute) depthSamples.shift();
}

/** How long the oldest of the queued jobs read has waited; undefined when none is queued. */
function oldestWait(queued: JobPage | undefined, now: number): string | undefined {
  const oldest = queued?.jobs.at(-1);
  if (!oldest) return undefined;
  const seconds = Math.round((now - Date.parse(oldest.createdAt)) / 1000);
  return seconds < 120 ? `${seconds} s` : `${Math.round(seconds / 60)} min`;
}

function shown(page: JobPage | undefined): string {
  if (!page) return '…';
  return `${page.jobs.length}${page.nextCursor ? '+' : ''}`;
}

/** Jobs that ended in each of the last `minutes` minutes, from their `endedAt`. */
function perMinute(pages: Array<JobPage | undefined>, now: number): [number[], ...number[][]] {
  const end = Math.floor(now / minute) * minute;
  const start = end - (minutes - 1) * minute;
  const x = Array.from({ length: minutes }, (_, i) => (start + i * minute) / 1000);
  const series = pages.map((page) => {
    const counts = new Array<number>(minutes).fill(0);
    for (const job of page?.jobs ?? []) {
      if (!job.endedAt) continue;
      const slot = Math.floor((Date.parse(job.endedAt) - start) / minute);
      if (slot >= 0 && slot < minutes) counts[slot]! += 1;
    }
    return counts;
  });
  return [x, ...series];
}

export function Overview() {
  const queued = useJobPage({ state: 'queued', limit: countLimit });
  const running = useJobPage({ state: 'running', limit: countLimit });
  const finished = useJobPage({ state: 'finished', limit: countLimit });
  const failed = useJobPage({ state: 'failed', limit: countLimit });
  const fleet = useFleet();
  const pages = [queued, running, finished, failed];
  const byState = Object.fromEntries(states.map((state, i) => [state, pages[i]!.data])) as Record<JobState, JobPage | undefined>;
  const throughput = useMemo(
    () => perMinute([finished.data, failed.data], Date.now()),
    // Recomputed when either page is read again.
    [finished.dataUpdatedAt, failed.dataUpdatedAt],
  );

  const depth = useMemo((): [number[], ...number[][]] => {
    if (queued.data && running.data) sampleDepth(queued.data, running.data, Math.max(queued.dataUpdatedAt, running.dataUpdatedAt));
    return [depthSamples.map((s) => s.at / 1000), depthSamples.map((s) => s.queued), depthSamples.map((s) => s.running)];
    // A new sample comes with each read of either list.
  }, [queued.dataUpdatedAt, running.dataUpdatedAt]);

  const error = pages.find((p) => p.error)?.error;
  if (error) return <FailureNotice error={error} what="the jobs" />;
  const loaded = pages.every((p) => p.data);
  const empty = loaded && pages.every((p) => p.data!.jobs.length === 0);

  const types = [...new Set(pages.flatMap((p) => p.data?.jobs.map((j) => j.type) ?? []))].sort();
  // A quiet worker's last report (its slots busy when it stopped) says nothing of now.
  const now = Date.now();
  const workers = (fleet.data?.workers ?? []).filter((w) => !isQuiet(w, now));
  const slots = workers.reduce((sum, w) => sum + w.slots, 0);
  const used = workers.reduce((sum, w) => sum + w.running, 0);

  return (
    <section>
      <h1>Overview</h1>
      {empty && (
        <div className="notice hint" data-testid="first-run">
          <strong>No jobs yet.</strong> Submit one and watch it run here:
          <pre>npx planrun submit transcode --input '{'{}'}' --wait</pre>
        </div>
      )}
      <div className="cards">
        {states.map((state) => (
          <Link key={state} href={`/jobs?state=${state}`} className={`card state-${state}`} data-testid={`count-${state}`}>
            <span className="card-label">{state}</span>
            <span className="card-value">{shown(byState[state])}</span>
          </Link>
        ))}
        <div className="card" data-testid="oldest-queued">
          <span className="card-label">oldest queued</span>
          <span className="card-value">{oldestWait(byState.queued, now) ?? '—'}</span>
          <span className="card-note">
            {byState.queued?.jobs.length ? `waiting${byState.queued.nextCursor ? ` (of the latest ${countLimit})` : ''}` : 'none queued'}
          </span>
        </div>
        <Link href="/fleet" className="card" data-testid="fleet-utilisation">
          <span className="card-label">fleet</span>
          <span className="card-value">
            {used} / {slots}
          </span>
          <span className="card-note">
            slots used, {workers.length} worker{workers.length === 1 ? '' : 's'}
          </span>
        </Link>
      </div>
      <Chart
        title="Jobs ended per minute (last hour)"
        series={[
          { label: 'finished', color: '#2f9e44' },
          { label: 'failed', color: '#e03131' },
        ]}
        data={throughput}
      />
      <Chart
        title="Queued and running (since this tab opened)"
        series={[
          { label: 'queued', color: '#1c7ed6' },
          { label: 'running', color: '#f08c00' },
        ]}
        data={depth}
      />
      {types.length > 0 && (
        <table className="grid">
          <thead>
            <tr>
              <th>type</th>
              {states.map((s) => (
                <th key={s}>{s}</th>
              ))}
            </tr>
          </thead>
          <tbody>
            {types.map((type) => (
              <tr key={type}>
                <td>
                  <Link href={`/jobs?type=${encodeURIComponent(type)}`}>{type}</Link>
                </td>
                {states.map((s) => (
                  <td key={s}>{byState[s]?.jobs.filter((j) => j.type === type).length ?? '…'}</td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <p className="footnote">Counts are of the latest {countLimit} jobs in each state; "+" means there are more.</p>
    </section>
  );
}
