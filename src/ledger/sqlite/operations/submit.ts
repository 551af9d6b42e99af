/**
 * submit: (none) -> queued@1, plus the outbox row of its work message, in one transaction.
 *
 * Params: tenant, type, input (JSON-serialisable), requires?, idempotencyKey?, maxAttempts?
 * Result: { job, created }. A (tenant, idempotencyKey) seen before returns the existing
 *         job with created=false and writes nothing.
 * Throws: LedgerError invalid_input, naming the field (a NUL in tenant, type or
 *         idempotencyKey included: shared/input-validation.ts).
 */
import { randomUUID } from 'node:crypto';
import type { SubmitParams, SubmitResult } from '../../ledger.js';
import { validateSubmission } from '../../shared/input-validation.js';
import type { SqliteContext } from '../context.js';
import { type JobRow, selectJobById, toJob } from '../rows.js';
import { enqueueWork } from './outbox.js';

const selectByKey = 'SELECT * FROM jobs WHERE tenant = ? AND idempotency_key = ?';
const insertJob = `INSERT INTO jobs (id, tenant, type, input, requires, idempotency_key, state, attempt, max_attempts,
    not_before, redispatch_at, created_at, updated_at)
  VALUES (@id, @tenant, @type, @input, @requires, @idempotencyKey, 'queued', 1, @maxAttempts,
    @now, @redispatchAt, @now, @now)`;

export function submit(ctx: SqliteContext, params: SubmitParams): SubmitResult {
  const valid = validateSubmission(params, ctx.config.defaultMaxAttempts);
  if (valid.idempotencyKey !== null) {
    const existing = ctx.sql(selectByKey).get(valid.tenant, valid.idempotencyKey) as JobRow | undefined;
    if (existing) return { job: toJob(existing), created: false };
  }
  const now = ctx.clock.now();
  const id = randomUUID();
  ctx.sql(insertJob).run({ ...valid, id, now, redispatchAt: now + ctx.config.redispatchAfterMs });
  const row = ctx.sql(selectJobById).get(id) as JobRow;
  enqueueWork(ctx, row, now);
  return { job: toJob(row), created: true };
}
