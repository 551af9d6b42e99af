/**
 * The job state machine, declared once. docs/state-machine.md draws it; the database
 * enforces the state names with a CHECK; every operation of a driver moves a job only
 * along one of these edges.
 */
export const JobState = {
  queued: 'queued',
  running: 'running',
  finished: 'finished',
  failed: 'failed',
} as const;
export type JobState = (typeof JobState)[keyof typeof JobState];

export function isTerminal(state: JobState): boolean {
  return state === JobState.finished || state === JobState.failed;
}

/** Why a failed job failed. */
export const FailureReason = {
  /** The job raised a Permanent error: the same input would fail the same way. */
  permanent: 'permanent',
  /** Transient errors or expired leases used up every attempt. */
  exhausted: 'exhausted',
  /** Cancelled by its tenant. */
  cancelled: 'cancelled',
  /** No worker of the fleet offers its type or a capability it requires. */
  unroutable: 'unroutable',
} as const;
export type FailureReason = (typeof FailureReason)[keyof typeof FailureReason];

/** Every edge of the state machine, by name. */
export const Transition = {
  submit: 'submit', // (none) -> queued@1
  grant: 'grant', // queued@n -> running@n
  abandon: 'abandon', // running@n -> queued@n (a grant its holder never took up within grantWindowMs: same attempt, its token dead)
  finish: 'finish', // running@n -> finished
  failPermanent: 'fail_permanent', // running@n -> failed/permanent
  retry: 'retry', // running@n -> queued@n+1 (transient error, attempts left)
  exhaust: 'exhaust', // running@n -> failed/exhausted (transient error or expired lease, no attempts left)
  expire: 'expire', // running@n -> queued@n+1 (lease expired, attempts left)
  release: 'release', // running@n -> queued@n+1 due at once (its worker handed the lease back: a Fatal error, or stopping; attempts left)
  cancelQueued: 'cancel_queued', // queued@n -> failed/cancelled
  cancelRunning: 'cancel_running', // running@n -> failed/cancelled (worker stopped it, or its lease expired after the request)
  reject: 'reject', // queued@1 -> failed/unroutable
  setAside: 'set_aside', // queued@n -> failed/permanent, error code undeliverable (its work message can never be published)
} as const;
export type Transition = (typeof Transition)[keyof typeof Transition];

/** How one attempt ended, as kept in the attempt history. */
export const AttemptOutcome = {
  finished: 'finished',
  failed: 'failed',
  retried: 'retried',
  expired: 'expired',
  /** Handed back by its worker (release): the next attempt is due at once. */
  released: 'released',
  cancelled: 'cancelled',
} as const;
export type AttemptOutcome = (typeof AttemptOutcome)[keyof typeof AttemptOutcome];
