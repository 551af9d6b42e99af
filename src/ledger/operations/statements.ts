/**
 * The named statements every ledger driver supplies, in its own SQL dialect, and that the
 * operations (the plans of this folder) are written over. A statement does one thing to
 * the database and decides nothing: the choice of edge, the order of statements and
 * everything an operation answers are its plan's. What a statement must do is stated
 * here, and each driver's implementation (sqlite/statements.ts, postgres/statements.ts)
 * does exactly that; the conformance suite runs the same plans over both.
 *
 * Conventions:
 *   - a "guarded" statement changes a row only where its WHERE guard holds, and answers
 *     whether it did (a boolean) or the row as the change left it (undefined when the
 *     guard did not hold);
 *   - rows come back as the Ledger's own types (Job, ...), converted by the driver;
 *   - times are the plan's `now` (OperationEnv), never read by a statement.
 */
import type { Job } from '../ledger.js';

/** The live lease a statement is keyed to. */
export interface LeaseKey {
  jobId: string;
  attempt: number;
  token: string;
}

export interface LedgerStatements {
  /** The job, or undefined when there is none. Takes no lock. */
  selectJob(params: { jobId: string }): Job | undefined;

  /**
   * Guarded, the grant edge queued@n -> running@n: where the job is queued at `attempt` and
   * due (not_before <= now), it becomes running with the lease (token, worker as holder,
   * proof, deadline), no redispatch time, started_at kept or set to now. Answers the row after.
   */
  grantLease(params: {
    jobId: string;
    attempt: number;
    worker: string;
    proof: string | null;
    token: string;
    deadline: number;
    now: number;
  }): Job | undefined;

  /**
   * Guarded: lease_deadline := deadline where the job is running at `attempt`, held by
   * `worker` with the same (non-null) `proof`, its lease live at `now` and no cancel
   * requested. Answers the row after (its token is the live lease's).
   */
  regrantLease(params: { jobId: string; attempt: number; worker: string; proof: string; deadline: number; now: number }): Job | undefined;

  /** The history row of attempt `attempt`, started by `worker` at `now`. */
  insertAttempt(params: { jobId: string; attempt: number; worker: string; now: number }): void;

  /**
   * Guarded: lease_deadline := deadline where the job is running at `attempt` with
   * `token`, its lease is live at `now` (deadline > now) and no cancel was requested.
   */
  extendLease(params: LeaseKey & { deadline: number; now: number }): boolean;

  /** Guarded as extendLease: progress := fraction, progress_message := message. */
  updateProgress(params: LeaseKey & { fraction: number; message: string | null; now: number }): boolean;
}
