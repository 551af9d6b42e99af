/**
 * The errors the ledger records on its own, when an attempt ends without its worker's
 * report of a failure: a cancellation, and a lease that ran out.
 */
import type { SerializedError } from '../../core/errors.js';

/** What a job cancelled by its tenant ends with (cancel of a queued job, settle or sweep after a cancel request). */
export const cancelledError: SerializedError = {
  class: 'permanent',
  code: 'cancelled',
  message: 'the job was cancelled by its tenant',
};

/** What the sweeper records when a lease ran out before its attempt ended. */
export const leaseExpiredError: SerializedError = {
  class: 'transient',
  code: 'lease_expired',
  message: 'the worker stopped renewing its lease (crashed, stopped or cut off) before the attempt ended',
};
