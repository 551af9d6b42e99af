/** One attempt's log: read once, or followed line by line (`?follow=1`) while the attempt runs. */
import { useQuery } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
import { readEvents } from '../events.js';
import { FailureNotice } from '../components/Notice.js';
import { getLogs, logsPath, type LogLine } from '../operator-api.js';
import { useSession } from '../session.js';

export function Logs({ jobId, attempt, live }: { jobId: string; attempt: number; live: boolean }) {
  const { key } = useSession();
  const read = useQuery({ queryKey: ['logs', jobId, attempt], queryFn: () => getLogs(key, jobId, attempt), enabled: !live, retry: false });
  const [followed, setFollowed] = useState<LogLine[]>([]);
  const [followError, setFollowError] = useState<unknown>(undefined);

  useEffect(() => {
    if (!live) return;
    setFollowed([]);
    setFollowError(undefined);
    const abort = new AbortController();
    readEvents(key, `${logsPath(jobId, attempt)}?follow=1`, abort.signal, (event, data) => {
      if (event === 'line') setFollowed((lines) => [...lines, data as LogLine]);
    }).catch((error: unknown) => {
      if (!abort.signal.aborted) setFollowError(error);
    });
    return () => abort.abort();
  }, [key, jobId, attempt, live]);

  const error = live ? followError : read.error;
  const lines = live ? followed : (read.data ?? []);
  return (
    <div className="logs" data-testid="logs">
      <h3>
        Log of attempt {attempt}
        {live && <span className="muted"> (following)</span>}
      </h3>
      {error ? (
        <FailureNotice error={error} what="the job's log" />
      ) : (
        <pre>
          {lines.length === 0 && !read.isLoading ? <span className="muted">(nothing printed)</span> : null}
          {lines.map((line, i) => (
            <div key={i} className={`log-${line.stream}`}>
              {line.time && <span className="muted">{line.time} </span>}
              {line.stream && <span className="muted">{line.stream} </span>}
              <span className="log-message">
                {line.message}
                {line.fields ? ` ${JSON.stringify(line.fields)}` : ''}
              </span>
            </div>
          ))}
        </pre>
      )}
    </div>
  );
}
