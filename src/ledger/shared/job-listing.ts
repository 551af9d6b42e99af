/**
 * Pages of a job listing, for every driver: newest first (by the jobs' insertion sequence),
 * and the opaque cursor that names the last sequence number a page showed.
 */
import { LedgerError, LedgerErrorCode } from '../errors.js';
import type { Job, JobPage } from '../ledger.js';

export function encodeCursor(seq: number): string {
  return Buffer.from(`seq:${seq}`).toString('base64url');
}

/** The sequence number a cursor names; invalid_input for anything encodeCursor did not write. */
export function decodeCursor(cursor: string): number {
  // At most 15 digits: every such number is exact as a JS number (and as a bigint).
  const match = typeof cursor === 'string' ? /^seq:(\d{1,15})$/.exec(Buffer.from(cursor, 'base64url').toString()) : null;
  if (!match) throw new LedgerError(LedgerErrorCode.invalidInput, 'cursor is not one this ledger returned');
  return Number(match[1]);
}

/**
 * The page of up to `limit` jobs from `rows`, read newest first with LIMIT limit + 1: the
 * extra row only says that there is more, and the cursor names the last row shown.
 */
export function jobPage<R extends { seq: number }>(rows: readonly R[], limit: number, toJob: (row: R) => Job): JobPage {
  const more = rows.length > limit;
  const shown = rows.slice(0, limit);
  return { jobs: shown.map(toJob), nextCursor: more ? encodeCursor(shown[shown.length - 1]!.seq) : null };
}
