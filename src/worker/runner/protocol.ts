/** The messages a pool and its child processes exchange over the IPC channel (JSON). */
import type { JobLimits } from '../../wire/jobs.js';
import type { RunOutcome } from './run-outcome.js';

/** What a child is started with, as its one command-line argument. */
export interface ChildConfig {
  jobModuleUrls: string[];
  progressThrottleMs: number;
}

/** One job for one child. Input and result must be plain JSON, as they travel further as JSON anyway. */
export interface RunTask {
  jobId: string;
  attempt: number;
  tenant: string;
  type: string;
  input: unknown;
  scratchDir: string;
  /** The submission's run timeout, when it set one; else the job type's, else the worker's. */
  timeoutSeconds?: number;
  /**
   * What the job may add to its scratch folder, in bytes: the reserve its worker admitted it
   * with. The runner ends a job past it Permanent `resource_limit`; absent: not watched.
   */
  scratchReserveBytes?: number;
  /**
   * What the scratch folder holds as the job starts, in bytes, when the worker knows it
   * without a look (a folder it has just made and fetched no input into holds nothing):
   * the reserve counts from there. Absent: the folder is measured as the job starts.
   */
  scratchStartBytes?: number;
  /** The submission's resource limits, when it set any: the runner enforces the lower of these and the job type's. */
  limits?: JobLimits;
}

/** Parent to child. A child is reused, so `runId` tells one run's messages from the next's. */
/** `env` is the job's whole environment: the child replaces its own with it before the job runs. */
export type ParentMessage = { kind: 'run'; runId: number; task: RunTask; env: Record<string, string> } | { kind: 'abort'; runId: number };

/** Child to parent. */
export type ChildMessage =
  | { kind: 'ready' }
  | { kind: 'load_failed'; message: string }
  | { kind: 'progress'; runId: number; fraction: number; message?: string }
  /** A `ctx.log(message, fields)` of the job's code. */
  | { kind: 'log'; runId: number; message: string; fields?: Record<string, unknown> }
  | { kind: 'result'; runId: number; outcome: RunOutcome }
  /** Sent just before the child exits on an uncaught exception, so the outcome can say what it was. */
  | { kind: 'crashing'; message: string };

/** Job code can call `process.send` too; the parent only acts on messages of the right shape. */
export function isChildMessage(value: unknown): value is ChildMessage {
  if (typeof value !== 'object' || value === null) return false;
  const message = value as Record<string, unknown>;
  switch (message.kind) {
    case 'ready':
      return true;
    case 'load_failed':
    case 'crashing':
      return typeof message.message === 'string';
    case 'progress':
      return typeof message.runId === 'number' && typeof message.fraction === 'number';
    case 'log':
      return (
        typeof message.runId === 'number' &&
        typeof message.message === 'string' &&
        (message.fields === undefined || (typeof message.fields === 'object' && message.fields !== null && !Array.isArray(message.fields)))
      );
    case 'result':
      return typeof message.runId === 'number' && typeof message.outcome === 'object' && message.outcome !== null;
    default:
      return false;
  }
}
