/**
 * The holding area: failed jobs grouped by type and error code (`GET /v1/failures`), each
 * group redriven at once (`POST /v1/jobs/retry`) after a confirmation naming how many jobs.
 */
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link } from 'wouter';
import { FailureNotice, time } from '../components/Notice.js';
import { getFailureGroups, retryGroup, type FailureGroup } from '../operator-api.js';
import { refreshMs } from '../queries.js';
import { useSession } from '../session.js';

export function Failures() {
  const { key } = useSession();
  const failures = useQuery({
    queryKey: ['failures'],
    queryFn: () => getFailureGroups(key, undefined),
    refetchInterval: refreshMs,
  });
  // Shown above the table: a redriven group leaves it (its jobs are no longer waiting).
  const [redriven, setRedriven] = useState<{ group: FailureGroup; count: number }>();

  return (
    <section>
      <h1>Failures</h1>
      {redriven && (
        <p className="notice" role="status" data-testid="redriven">
          {redriven.count} redriven from {redriven.group.type} / <code>{redriven.group.code}</code>: each is a new job, linked to the one it retries.
        </p>
      )}
      {failures.error ? (
        <FailureNotice error={failures.error} what="the failures" />
      ) : failures.data?.length === 0 ? (
        <p>No failed jobs are waiting. Jobs that fail land here, grouped by type and error code.</p>
      ) : (
        <table className="grid" data-testid="failure-groups">
          <thead>
            <tr>
              <th>type</th>
              <th>error code</th>
              <th>jobs</th>
              <th>last failed</th>
              <th>example</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {failures.data?.map((group) => (
              <GroupRow key={`${group.type}\n${group.code}`} group={group} onRedriven={(count) => setRedriven({ group, count })} />
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

function GroupRow({ group, onRedriven }: { group: FailureGroup; onRedriven: (count: number) => void }) {
  const { key } = useSession();
  const client = useQueryClient();
  const [confirming, setConfirming] = useState(false);
  const redrive = useMutation({
    mutationFn: () => retryGroup(key, group),
    onSuccess: onRedriven,
    onSettled: () => {
      setConfirming(false);
      void client.invalidateQueries({ queryKey: ['failures'] });
    },
  });
  const jobs = `${group.count} job${group.count === 1 ? '' : 's'}`;
  return (
    <tr data-group={`${group.type}/${group.code}`}>
      <td>{group.type}</td>
      <td>
        <code>{group.code}</code>
      </td>
      <td data-testid="group-count">{group.count}</td>
      <td>{time(group.lastEndedAt)}</td>
      <td>{group.sampleJobId && <Link href={`/jobs/${group.sampleJobId}`}>{group.sampleJobId.slice(0, 8)}</Link>}</td>
      <td>
        {confirming ? (
          <>
            <button className="danger" onClick={() => redrive.mutate()} disabled={redrive.isPending} data-testid="confirm-redrive">
              Redrive {jobs}
            </button>{' '}
            <button onClick={() => setConfirming(false)}>Keep them</button>
          </>
        ) : (
          <button onClick={() => setConfirming(true)} data-testid="redrive">
            Redrive…
          </button>
        )}
        {redrive.error && <FailureNotice error={redrive.error} what="redrive" />}
      </td>
    </tr>
  );
}
