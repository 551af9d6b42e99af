/**
 * The fields of a submission that tell the dispatcher how to release it (docs/dispatch.md):
 * its priority, its concurrency key, and when it may start. Both submission paths (HTTP and
 * the submit queue) take them with the same schema, and hand them to the ledger the same way.
 */
import { LedgerError, LedgerErrorCode } from '../ledger/errors.js';
import type { SubmitParams } from '../ledger/ledger.js';

/** A year, the farthest ahead a job may be put (the ledger refuses more too). */
const maxDelaySeconds = 366 * 24 * 3600;

export const dispatchProperties = {
  priority: {
    type: 'integer',
    minimum: -1_000_000,
    maximum: 1_000_000,
    description: "higher first among the tenant's waiting jobs of the same type (default 0)",
  },
  concurrencyKey: {
    type: 'string',
    minLength: 1,
    maxLength: 255,
    description: "at most concurrencyLimit of the tenant's jobs with this key run at once",
  },
  concurrencyLimit: { type: 'integer', minimum: 1, maximum: 1_000_000, description: 'with concurrencyKey: how many may run at once (default 1)' },
  runAt: { type: 'string', minLength: 1, maxLength: 64, description: 'an ISO 8601 time before which the job does not start (it is `scheduled` until then)' },
  delaySeconds: { type: 'number', minimum: 0, maximum: maxDelaySeconds, description: 'as runAt, this many seconds after the submission' },
} as const;

export interface DispatchFields {
  priority?: number;
  concurrencyKey?: string;
  concurrencyLimit?: number;
  runAt?: string;
  delaySeconds?: number;
}

/** The dispatch fields as the ledger takes them: runAt as epoch milliseconds; absent ones left out. */
export function dispatchParams(
  fields: DispatchFields,
  where: string,
): Pick<SubmitParams, 'priority' | 'concurrencyKey' | 'concurrencyLimit' | 'runAt' | 'delaySeconds'> {
  const params: Pick<SubmitParams, 'priority' | 'concurrencyKey' | 'concurrencyLimit' | 'runAt' | 'delaySeconds'> = {};
  if (fields.priority !== undefined) params.priority = fields.priority;
  if (fields.concurrencyKey !== undefined) params.concurrencyKey = fields.concurrencyKey;
  if (fields.concurrencyLimit !== undefined) params.concurrencyLimit = fields.concurrencyLimit;
  if (fields.delaySeconds !== undefined) params.delaySeconds = fields.delaySeconds;
  if (fields.runAt !== undefined) {
    // An ISO 8601 time with a zone, so that no server's local time decides when a job starts.
    const at = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/.test(fields.runAt) ? Date.parse(fields.runAt) : NaN;
    if (Number.isNaN(at)) {
      throw new LedgerError(LedgerErrorCode.invalidInput, `${where}/runAt must be an ISO 8601 time with its zone, like 2026-12-01T18:00:00Z`);
    }
    params.runAt = at;
  }
  return params;
}
