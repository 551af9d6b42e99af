/** How a failed request reads on a page: what went wrong, in the terms a user acts on. */
import { ApiFailure } from '../api.js';

export function FailureNotice({ error, what }: { error: unknown; what: string }) {
  if (error instanceof ApiFailure && error.kind === 'missing-endpoint') {
    return (
      <div className="notice missing" role="status">
        <strong>Not available on this orchestrator:</strong> {what} ({error.message}: a planrun version without it).
      </div>
    );
  }
  const message = error instanceof Error ? error.message : String(error);
  return (
    <div className="notice error" role="alert">
      <strong>Cannot load {what}:</strong> {message}
    </div>
  );
}

export function StateBadge({ state }: { state: string }) {
  return <span className={`badge state-${state}`}>{state}</span>;
}

/** "3 s ago", "5 min ago": how long since an ISO time. */
export function age(iso: string, now = Date.now()): string {
  const seconds = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  if (seconds < 60) return `${seconds} s ago`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 86_400) return `${Math.floor(seconds / 3600)} h ago`;
  return `${Math.floor(seconds / 86_400)} d ago`;
}

export function time(iso: string | null | undefined): string {
  return iso ? new Date(iso).toLocaleString() : '—';
}
