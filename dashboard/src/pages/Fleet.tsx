/** The fleet: every worker heard from lately, what it offers and how busy it is; one gone quiet is marked. */
import { FailureNotice, age } from '../components/Notice.js';
import { isQuiet } from '../fleet-health.js';
import { useFleet } from '../queries.js';

export function Fleet() {
  const fleet = useFleet();
  if (fleet.error) return <FailureNotice error={fleet.error} what="the fleet" />;
  const workers = fleet.data?.workers ?? [];
  const now = Date.now();
  return (
    <section>
      <h1>Fleet</h1>
      {fleet.data && workers.length === 0 && (
        <div className="notice hint">
          No worker has reported lately. Start one: <pre>npx planrun worker --jobs ./jobs.js</pre>
        </div>
      )}
      <table className="grid" data-testid="fleet">
        <thead>
          <tr>
            <th>worker</th>
            <th>job types</th>
            <th>capabilities</th>
            <th>slots used</th>
            <th>last heartbeat</th>
          </tr>
        </thead>
        <tbody>
          {workers.map((w) => {
            // The fleet lists a worker until its window passes: one that stopped heartbeating shows it first.
            const quiet = isQuiet(w, now);
            return (
              <tr key={w.id} className={quiet ? 'quiet' : ''} data-worker={w.id}>
                <td>{w.id}</td>
                <td>
                  {w.jobTypes.join(', ')}
                  {w.heldBack.map((h) => (
                    <div key={h.type} className="muted">
                      {h.type} held back: lacks {h.missing.join(', ')}
                    </div>
                  ))}
                </td>
                <td>{w.capabilities.join(', ') || '—'}</td>
                <td>
                  <progress max={w.slots} value={w.running} /> {w.running} / {w.slots}
                </td>
                <td>
                  {age(w.lastHeartbeat, now)}
                  {quiet && <span className="badge state-failed">quiet</span>}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </section>
  );
}
