/**
 * The holding area: failed jobs grouped by type and error code (`GET /v1/failures`), each
 * group redriven at once (`POST /v1/jobs/retry`) after a confirmation naming how many jobs.
 *
 * An orchestrator without `GET /v1/failures` gets the same groups made here from its latest
 * failed jobs, under a notice that says so; redrive then needs the newer orchestrator.
 */
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link } from 'wouter';
import { ApiFailure, getJson, query, type JobPage } from '../api.js';
import { FailureNotice, time } from '../components/Notice.js';
import { getFailureGroups, retryGroup, type FailureGroup } from '../operator-api.js';
import { countLimit, refreshMs } from '../queries.js';
import { useSession } from '../session.js';

/** Groups of the latest failed jobs, made here: for an orchestrator without `GET /v1/failures`. */
function groupFailedJobs(page: JobPage): FailureGroup[] {
  const groups = new Map<string, FailureGroup>();
  for (const job of page.jobs) {
    // Cancelled jobs are not in the holding area: someone meant them to stop.
    if (job.reason === 'cancelled') continue;
    const code = job.error?.code ?? 'unknown';
    const group = groups.get(`${job.type}\n${code}`) ?? { type: job.type, code, count: 0, sampleJobId: job.id, lastEndedAt: job.endedAt ?? undefined };
    group.count += 1;
    group.firstEndedAt = job.endedAt ?? group.firstEndedAt;
    groups.set(`${job.type}\n${code}`, group);
  }
  return [...groups.values()].sort((a, b) => b.count - a.count);
}

interface Groups {
  groups: FailureGroup[];
  /** Why these groups were made here rather than by the server. */
  madeHere?: ApiFailure;
}

export function Failures() {
  const { key } = useSession();
  const failures = useQuery({
    queryKey: ['failures'],
    queryFn: async (): Promise<Groups> => {
      try {
        return { groups: await getFailureGroups(key, undefined) };
      } catch (error) {
        if (!(error instanceof ApiFailure && error.kind === 'missing-endpoint')) throw error;
        const page = await getJson<JobPage>(key, `/v1/jobs${query({ state: 'failed', limit: countLimit })}`);
        return { groups: groupFailedJobs(page), madeHere: error };
      }
    },
    refetchInterval: refreshMs,
  });

  return (
    <section>
      <h1>Failures</h1>
      {failures.data?.madeHere && (
        <div className="notice missing" role="status" data-testid="failures-made-here">
          Grouped here from the latest {countLimit} failed jobs: this orchestrator has no failures endpoint ({failures.data.madeHere.message}), nor bulk
          redrive.
        </div>
      )}
      {failures.error ? (
        <FailureNotice error={failures.error} what="the failures" />
      ) : failures.data?.groups.length === 0 ? (
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
            {failures.data?.groups.map((group) => (
              <GroupRow key={`${group.type}\n${group.code}`} group={group} />
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

function GroupRow({ group }: { group: FailureGroup }) {
  const { key } = useSession();
  const client = useQueryClient();
  const [confirming, setConfirming] = useState(false);
  const redrive = useMutation({
    mutationFn: () => retryGroup(key, group),
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
        {redrive.data !== undefined && <span data-testid="redriven"> {redrive.data} redriven</span>}
        {redrive.error && <FailureNotice error={redrive.error} what="redrive" />}
      </td>
    </tr>
  );
}
