/** What the areas of the ledger conformance suite share: the `run` harness and a few helpers. */
import assert from 'node:assert/strict';

import type { Job, JobPage, Ledger, LedgerConfig, ListJobsParams, SubmitParams } from '../../../src/ledger/ledger.js';
import { errors, failed, grant, settleOk, submitAndGrant, testConfig, type Granted, type LedgerHarness } from '../testing.js';

/**
 * Runs `body` against a fresh ledger of the driver under test on a ManualClock (testConfig
 * unless `config` says otherwise), and closes it after. Every area of the suite takes it.
 */
export type Run = <T>(body: (h: LedgerHarness) => Promise<T>, config?: Partial<LedgerConfig>) => Promise<T>;

export const TTL = testConfig.leaseTtlMs;
export const BASE = testConfig.backoffBaseMs;

/** Every job of a listing, following the cursor to the end. */
export async function listAll(ledger: Ledger, params: ListJobsParams): Promise<Job[]> {
  const jobs: Job[] = [];
  let cursor: string | undefined;
  for (let pages = 0; pages < 1000; pages++) {
    const page: JobPage = await ledger.listJobs(cursor === undefined ? params : { ...params, cursor });
    jobs.push(...page.jobs);
    if (page.nextCursor === null) return jobs;
    cursor = page.nextCursor;
  }
  assert.fail('listJobs never ended its pages');
}

export const ids = (jobs: readonly Job[]): string[] => jobs.map((j) => j.id).sort();

export const emptySweep = { abandoned: [], requeued: [], exhausted: [], cancelled: [], redispatched: [] };

/** Grants attempt 1, fails it transiently, waits out the backoff and grants attempt 2. */
export async function reachAttempt2(h: LedgerHarness, overrides: Partial<SubmitParams> = {}): Promise<{ first: Granted; second: Granted }> {
  const first = await submitAndGrant(h.ledger, overrides, 'worker-1');
  await settleOk(h.ledger, first.ref, failed(errors.transient), 'retry');
  h.clock.advance(BASE);
  const second = await grant(h.ledger, first.job.id, 'worker-2');
  assert.equal(second.ref.attempt, 2);
  return { first, second };
}
