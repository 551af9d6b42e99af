/**
 * cancel: by the job's tenant.
 *   queued@n  -> failed/cancelled at once, with its failure message   (cancel_queued)
 *   running@n -> stays running with cancel_requested: the worker's next renewal or fence
 *                check says `cancelled`, it stops the job and settles it as cancelled;
 *                if it never does, the sweeper ends it when the lease runs out
 *   ended     -> refused `ended`; unknown or another tenant's job -> refused `unknown_job`
 */
import type { CancelParams, CancelResult } from '../../ledger.js';
import { cancelledError } from '../../shared/recorded-errors.js';
import { isTerminal } from '../../states.js';
import type { SqliteContext } from '../context.js';
import { type JobRow, selectJobById, toJob } from '../rows.js';
import { enqueueResult } from './outbox.js';

const cancelQueued = `UPDATE jobs SET state = 'failed', failure_reason = 'cancelled', error_class = @class,
    error_code = @code, error_message = @message, redispatch_at = NULL, ended_at = @now, updated_at = @now
  WHERE id = @jobId AND state = 'queued'`;
const requestCancel = `UPDATE jobs SET cancel_requested = 1, updated_at = @now WHERE id = @jobId AND state = 'running'`;

export function cancel(ctx: SqliteContext, params: CancelParams): CancelResult {
  const row = ctx.sql(selectJobById).get(params.jobId) as JobRow | undefined;
  if (!row || (params.tenant !== undefined && row.tenant !== params.tenant)) {
    return { outcome: 'refused', reason: 'unknown_job' };
  }
  if (isTerminal(row.state)) return { outcome: 'refused', reason: 'ended', job: toJob(row) };
  const now = ctx.clock.now();
  if (row.state === 'queued') {
    ctx.sql(cancelQueued).run({ jobId: row.id, now, ...cancelledError });
    const after = ctx.sql(selectJobById).get(row.id) as JobRow;
    enqueueResult(ctx, after);
    return { outcome: 'cancelled', job: toJob(after) };
  }
  ctx.sql(requestCancel).run({ jobId: row.id, now });
  return { outcome: 'cancel_requested', job: toJob(ctx.sql(selectJobById).get(row.id) as JobRow) };
}
