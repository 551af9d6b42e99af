/**
 * submit: (none) -> queued@1, plus the outbox row of its work message, in one transaction.
 *
 * Params: tenant, type, input (JSON-serialisable), requires?, idempotencyKey?, maxAttempts?
 * Result: { job, created }. A (tenant, idempotencyKey) seen before returns the existing
 *         job with created=false and writes nothing. Two orchestrators submitting the same
 *         key at once: the unique index lets one insert, the other finds its job; batches
 *         with several keys lock them in one order first, so they cannot deadlock.
 * Throws: LedgerError invalid_input, naming the field (a NUL in tenant, type or
 *         idempotencyKey included: shared/input-validation.ts).
 */
import { randomUUID } from 'node:crypto';

import type { SubmitParams, SubmitResult } from '../../ledger.js';
import { validateSubmission, type ValidSubmission } from '../../shared/input-validation.js';
import type { PgContext } from '../context.js';
import { type JobRow, toJob } from '../rows.js';
import { enqueueWork } from './outbox.js';

const selectByKey = 'SELECT * FROM jobs WHERE tenant = $1 AND idempotency_key = $2';
const insertJob = `INSERT INTO jobs (id, tenant, type, input, requires, idempotency_key, state, attempt, max_attempts,
    not_before, redispatch_at, created_at, updated_at)
  VALUES ($1, $2, $3, $4, $5, $6, 'queued', 1, $7, $8, $9, $8, $8)
  ON CONFLICT (tenant, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
  RETURNING *`;

// Per (tenant, key), taken in one order by every batch: two batches naming the same keys in
// opposite orders would otherwise each insert one and wait for the other's (a deadlock that
// PostgreSQL breaks only after deadlock_timeout). Hash collisions merely serialise more.
const lockKeys = `SELECT pg_advisory_xact_lock($1, h)
  FROM (SELECT DISTINCT hashtext(k) AS h FROM unnest($2::text[]) AS k) AS keys ORDER BY h`;
const SUBMIT_LOCK_CLASS = 0x706c_6b79; // 'plky'

/** Validates the whole batch first, so an invalid submission writes none of it. */
export async function submitMany(ctx: PgContext, params: readonly SubmitParams[]): Promise<SubmitResult[]> {
  const valid = params.map((p) => validateSubmission(p, ctx.config.defaultMaxAttempts));
  const keys = new Set(valid.flatMap((v) => (v.idempotencyKey === null ? [] : [JSON.stringify([v.tenant, v.idempotencyKey])])));
  if (keys.size > 1) await ctx.rows(lockKeys, [SUBMIT_LOCK_CLASS, [...keys]]);
  const results: SubmitResult[] = [];
  for (const submission of valid) results.push(await submitOne(ctx, submission));
  return results;
}

async function submitOne(ctx: PgContext, valid: ValidSubmission): Promise<SubmitResult> {
  if (valid.idempotencyKey !== null) {
    const existing = await ctx.row<JobRow>(selectByKey, [valid.tenant, valid.idempotencyKey]);
    if (existing) return { job: toJob(existing), created: false };
  }
  const now = ctx.clock.now();
  const row = await ctx.row<JobRow>(insertJob, [
    randomUUID(),
    valid.tenant,
    valid.type,
    valid.input,
    valid.requires,
    valid.idempotencyKey,
    valid.maxAttempts,
    now,
    now + ctx.config.redispatchAfterMs,
  ]);
  if (!row) {
    // Another transaction inserted this key since our look-up and has committed by now.
    const existing = await ctx.row<JobRow>(selectByKey, [valid.tenant, valid.idempotencyKey]);
    if (!existing) throw new Error(`planrun ledger: idempotency key ${valid.idempotencyKey} conflicted with no job`);
    return { job: toJob(existing), created: false };
  }
  await enqueueWork(ctx, row, now, now);
  return { job: toJob(row), created: true };
}
