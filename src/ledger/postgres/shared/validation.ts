/**
 * Validation of what callers hand the ledger. Driver-neutral (it knows nothing of SQL):
 * the SQLite driver has the same rules privately, and both should import them from one
 * place under src/ledger/ once the lead moves this module there.
 */
import { isSerializedError } from '../../../core/errors.js';
import { LedgerError, LedgerErrorCode } from '../../errors.js';
import type { LedgerConfig, ListJobsParams, SettleParams, SubmitParams } from '../../ledger.js';
import { JobState } from '../../states.js';

function invalid(message: string): LedgerError {
  return new LedgerError(LedgerErrorCode.invalidInput, message);
}

/** A submission checked and normalised: input and requires as JSON text, requires sorted and unique. */
export interface ValidSubmission {
  tenant: string;
  type: string;
  input: string;
  requires: string;
  idempotencyKey: string | null;
  maxAttempts: number;
}

export function validateSubmission(params: SubmitParams, defaultMaxAttempts: number): ValidSubmission {
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

export function validateSettleOutcome(params: SettleParams): void {
  const outcome = params.outcome as { kind?: unknown; result?: unknown; error?: unknown } | undefined;
  if (outcome?.kind === 'finished') {
    if (typeof outcome.result !== 'object' || outcome.result === null) throw invalid('a finished settle needs a result object');
    return;
  }
  if (outcome?.kind === 'failed' && isSerializedError(outcome.error)) return;
  throw invalid('settle outcome must be {kind:"finished", result} or {kind:"failed", error:{class, code, message}}');
}

export function validateProgressFraction(fraction: unknown): void {
  if (typeof fraction !== 'number' || !(fraction >= 0 && fraction <= 1)) {
    throw invalid(`progress fraction must be a number from 0 to 1, got ${String(fraction)}`);
  }
}

export function validateConfig(config: LedgerConfig): LedgerConfig {
  for (const [name, value] of Object.entries(config)) {
    if (!Number.isInteger(value) || value < (name === 'defaultMaxAttempts' ? 1 : 0)) {
      throw invalid(`ledger config ${name} must be a non-negative integer, got ${value}`);
    }
  }
  return config;
}

/** The page size of a listing (default 50, at most 1000); throws on a bad size or state. */
export function validateListParams(params: ListJobsParams): number {
  const limit = params.limit ?? 50;
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw invalid('limit must be an integer from 1 to 1000');
  if (params.state !== undefined && !Object.values(JobState).includes(params.state)) {
    throw invalid(`state must be one of ${Object.values(JobState).join(', ')}`);
  }
  return limit;
}
