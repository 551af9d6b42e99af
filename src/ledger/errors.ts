/** Why a ledger call failed outright (refusals are values, not errors). */
export const LedgerErrorCode = {
  invalidInput: 'invalid_input',
  unknownJob: 'unknown_job',
  /** An idempotency key seen before came with another submission (type, input, requires, maxAttempts or timeoutSeconds). */
  idempotencyConflict: 'idempotency_conflict',
  /** The database file cannot be opened or written. */
  unavailable: 'ledger_unavailable',
  /** The database file is not a planrun ledger or is damaged. */
  corrupt: 'ledger_corrupt',
  /** The disk (or the database's size limit) is full: the transaction was rolled back. */
  full: 'ledger_full',
  /** The database was written by a newer planrun. */
  tooNew: 'ledger_too_new',
  closed: 'ledger_closed',
} as const;
export type LedgerErrorCode = (typeof LedgerErrorCode)[keyof typeof LedgerErrorCode];

export class LedgerError extends Error {
  override readonly name = 'LedgerError';
  constructor(
    readonly code: LedgerErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
