/**
 * submit: (none) -> queued@1, plus the outbox row of its work message, in one transaction.
 *
 * Params: tenant, type, input (JSON-serialisable), requires?, idempotencyKey?, maxAttempts?
 * Result: { job, created }. A (tenant, idempotencyKey) seen before returns the existing
 *         job with created=false and writes nothing.
 * Throws: LedgerError invalid_input, naming the field.
 */
import { randomUUID } from 'node:crypto';
import { LedgerError, LedgerErrorCode } from '../../errors.js';
import type { SubmitParams, SubmitResult } from '../../ledger.js';
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

interface ValidSubmission {
  tenant: string;
  type: string;
  input: string;
  requires: string;
  idempotencyKey: string | null;
  maxAttempts: number;
}

function invalid(message: string): LedgerError {
  return new LedgerError(LedgerErrorCode.invalidInput, message);
}

function validateSubmission(params: SubmitParams, defaultMaxAttempts: number): ValidSubmission {
  if (typeof params !== 'object' || params === null) throw invalid('submission must be an object');
  const { tenant, type, requires = [], idempotencyKey, maxAttempts = defaultMaxAttempts } = params;
  if (typeof tenant !== 'string' || tenant.length === 0) throw invalid('tenant must be a non-empty string');
  if (typeof type !== 'string' || type.length === 0) throw invalid('type must be a non-empty string');
  if (!Array.isArray(requires) || !requires.every((r) => typeof r === 'string' && r.length > 0)) {
    throw invalid('requires must be a list of non-empty strings');
  }
  if (idempotencyKey !== undefined && (typeof idempotencyKey !== 'string' || idempotencyKey.length === 0)) {
    throw invalid('idempotencyKey must be a non-empty string when given');
  }
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1) throw invalid('maxAttempts must be an integer of at least 1');
  let input: string | undefined;
  try {
    input = JSON.stringify(params.input ?? null);
  } catch (error) {
    throw invalid(`input must be JSON-serialisable: ${(error as Error).message}`);
  }
  if (input === undefined) throw invalid('input must be JSON-serialisable');
  return {
    tenant,
    type,
    input,
    requires: JSON.stringify([...new Set(requires)].sort()),
    idempotencyKey: idempotencyKey ?? null,
    maxAttempts,
  };
}
