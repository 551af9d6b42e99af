/**
 * One job: its state and progress (followed live through its event stream), error, result
 * and outputs, every attempt on a timeline with how it ended, the selected attempt's log,
 * and the buttons to cancel or retry it.
 */
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
import { Link, useLocation } from 'wouter';
import { ApiFailure, downloadOutput, getJson, jobPath, postJson, type AttemptView, type JobSummary, type JobView } from '../api.js';
import { readEvents } from '../events.js';
import { FailureNotice, StateBadge, time } from '../components/Notice.js';
import { retryJob, type RetryLinks } from '../operator-api.js';
import { Logs } from './Logs.js';
import { useSession } from '../session.js';

type Job = JobView & RetryLinks;

const terminal = (state: string) => state === 'finished' || state === 'failed';

/** Follows the job's event stream while it runs: each event updates the job shown; a state change reads it again (attempts too). */
function useJobEvents(id: string, running: boolean) {
  const { key } = useSession();
  const client = useQueryClient();
  useEffect(() => {
    if (!running) return;
    const abort = new AbortController();
    void (async () => {
      // The server ends the stream after the last state; a stream cut short is opened again.
      while (!abort.signal.aborted) {
        try {
          await readEvents(key, `${jobPath(id)}/events`, abort.signal, (event, data) => {
            const summary = data as JobSummary;
            client.setQueryData<Job>(['job', id], (job) => (job ? { ...job, ...summary } : job));
            if (event === 'state') void client.invalidateQueries({ queryKey: ['job', id] });
          });
          return;
        } catch (error) {
          if (abort.signal.aborted || (error instanceof ApiFailure && error.kind !== 'unreachable')) return;
          await new Promise((resolve) => setTimeout(resolve, 2000));
        }
      }
    })();
    return () => abort.abort();
  }, [id, running, key, client]);
}

export function JobDetail({ id }: { id: string }) {
  const { key } = useSession();
  const client = useQueryClient();
  const [, navigate] = useLocation();
  const job = useQuery({ queryKey: ['job', id], queryFn: () => getJson<Job>(key, jobPath(id)) });
  const running = job.data !== undefined && !terminal(job.data.state);
  useJobEvents(id, running);
  const [shownAttempt, setShownAttempt] = useState<number | undefined>(undefined);

  const cancel = useMutation({
    mutationFn: () => postJson<Job>(key, `${jobPath(id)}/cancel`),
    onSuccess: (answer) => client.setQueryData(['job', id], answer),
  });
  const retry = useMutation({
    mutationFn: () => retryJob(key, id),
    onSuccess: (answer) => {
      void client.invalidateQueries({ queryKey: ['job', id] });
      navigate(`/jobs/${answer.id}`);
    },
  });

  if (job.error) return <FailureNotice error={job.error} what={`job ${id}`} />;
  if (!job.data) return <p>Loading…</p>;
  const j = job.data;
  const attempt = shownAttempt ?? j.attempts.at(-1)?.attempt;
  const outputs = Object.keys(j.result?.outputFiles ?? j.result?.outputs ?? {});

  return (
    <section>
      <h1>
        {j.type} <StateBadge state={j.state} />
      </h1>
      <dl className="facts">
        <dt>id</dt>
        <dd data-testid="job-id">{j.id}</dd>
        <dt>tenant</dt>
        <dd>{j.tenant}</dd>
        {j.idempotencyKey && (
          <>
            <dt>idempotency key</dt>
            <dd>{j.idempotencyKey}</dd>
          </>
        )}
        <dt>submitted</dt>
        <dd>{time(j.createdAt)}</dd>
        <dt>ended</dt>
        <dd>{time(j.endedAt)}</dd>
        <dt>attempt</dt>
        <dd>
          {j.attempt} of {j.maxAttempts}
        </dd>
        {j.retryOf && (
          <>
            <dt>retry of</dt>
            <dd>
              <Link href={`/jobs/${j.retryOf}`} data-testid="retry-of">
                {j.retryOf}
              </Link>
            </dd>
          </>
        )}
        {j.retriedBy && (
          <>
            <dt>retried by</dt>
            <dd>
              <Link href={`/jobs/${j.retriedBy}`} data-testid="retried-by">
                {j.retriedBy}
              </Link>
            </dd>
          </>
        )}
      </dl>

      <div className="progress" data-testid="progress">
        <progress max={1} value={j.state === 'finished' ? 1 : (j.progress ?? 0)} />
        <span>
          {Math.round((j.state === 'finished' ? 1 : (j.progress ?? 0)) * 100)}% {j.progressMessage ?? ''}
        </span>
      </div>

      <div className="actions">
        {!terminal(j.state) && (
          <button onClick={() => cancel.mutate()} disabled={cancel.isPending || j.cancelRequested}>
            {j.cancelRequested ? 'Cancelling…' : 'Cancel'}
          </button>
        )}
        {j.state === 'failed' && !j.retriedBy && (
          <button onClick={() => retry.mutate()} disabled={retry.isPending} data-testid="retry">
            Retry
          </button>
        )}
      </div>
      {cancel.error && <FailureNotice error={cancel.error} what="the cancel" />}
      {retry.error && <FailureNotice error={retry.error} what="retry" />}

      {j.error && (
        <div className="notice error" data-testid="job-error">
          <strong>
            {j.error.class} / {j.error.code}
          </strong>
          {j.reason && <> ({j.reason})</>}: {j.error.message}
          {j.error.stack && <pre>{j.error.stack}</pre>}
        </div>
      )}

      {j.result && (
        <>
          <h2>Result</h2>
          {j.result.data !== undefined && <pre className="json">{JSON.stringify(j.result.data, null, 2)}</pre>}
          {outputs.length > 0 && (
            <ul className="outputs" data-testid="outputs">
              {outputs.map((name) => (
                <li key={name}>
                  <button className="link" onClick={() => void downloadOutput(key, j.id, name)}>
                    {name}
                  </button>
                  {j.result?.outputFiles?.[name]?.bytes !== undefined && <span className="muted"> {j.result.outputFiles[name].bytes} bytes</span>}
                </li>
              ))}
            </ul>
          )}
        </>
      )}

      <h2>Attempts</h2>
      <Timeline attempts={j.attempts} selected={attempt} onSelect={setShownAttempt} />
      {attempt !== undefined && <Logs jobId={j.id} attempt={attempt} live={running && attempt === j.attempt} />}
    </section>
  );
}

/** The attempts one under another, each a bar from its start to its end on the job's time axis. */
function Timeline({ attempts, selected, onSelect }: { attempts: AttemptView[]; selected: number | undefined; onSelect: (attempt: number) => void }) {
  const now = Date.now();
  const start = Math.min(...attempts.map((a) => Date.parse(a.startedAt)));
  // The axis ends now while an attempt runs, else where the last one ended.
  const end = Math.max(...attempts.map((a) => (a.endedAt ? Date.parse(a.endedAt) : now)));
  const span = Math.max(1, end - start);
  if (attempts.length === 0) return <p className="muted">No attempt yet: the job waits for a worker.</p>;
  return (
    <table className="grid timeline" data-testid="timeline">
      <thead>
        <tr>
          <th>#</th>
          <th>worker</th>
          <th>started</th>
          <th>ended</th>
          <th>outcome</th>
          <th className="bar-cell">timeline</th>
        </tr>
      </thead>
      <tbody>
        {attempts.map((a) => {
          const from = Date.parse(a.startedAt);
          const to = a.endedAt ? Date.parse(a.endedAt) : now;
          const outcome = a.outcome ?? 'running';
          return (
            <tr
              key={a.attempt}
              className={a.attempt === selected ? 'selected' : ''}
              data-attempt={a.attempt}
              data-outcome={outcome}
              onClick={() => onSelect(a.attempt)}
            >
              <td>{a.attempt}</td>
              <td>{a.worker}</td>
              <td>{time(a.startedAt)}</td>
              <td>{time(a.endedAt)}</td>
              <td>
                <span className={`badge outcome-${outcome}`}>{outcome}</span>
                {a.error && <span className="muted"> {a.error.code}</span>}
              </td>
              <td className="bar-cell">
                <div
                  className={`bar outcome-${outcome}`}
                  style={{ marginLeft: `${((from - start) / span) * 100}%`, width: `${Math.max(0.5, ((to - from) / span) * 100)}%` }}
                />
              </td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}
