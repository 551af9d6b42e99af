/** Ledger conformance: a finished or failed job never changes again, whatever is called on it. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import type { LeaseRef } from '../../../src/ledger/ledger.js';
import {
  drainOutbox,
  errors,
  expectGrantRefused,
  failed,
  finished,
  freshKey,
  mustGetJob,
  settleOk,
  snapshot,
  submitAndGrant,
  submitJob,
  submitParams,
  type LedgerHarness,
} from '../testing.js';
import { TTL, type Run } from './helpers.js';

export function terminalConformance(run: Run): void {
  describe('terminal states never change', () => {
    type Ending = (h: LedgerHarness) => Promise<{ jobId: string; ref: LeaseRef | null }>;
    const endings: Array<[string, Ending]> = [
      [
        'finished',
        async ({ ledger }) => {
          const g = await submitAndGrant(ledger);
          await settleOk(ledger, g.ref, finished(), 'finish');
          return { jobId: g.job.id, ref: g.ref };
        },
      ],
      [
        'failed/permanent',
        async ({ ledger }) => {
          const g = await submitAndGrant(ledger);
          await settleOk(ledger, g.ref, failed(errors.permanent), 'fail_permanent');
          return { jobId: g.job.id, ref: g.ref };
        },
      ],
      [
        'failed/exhausted by settle',
        async ({ ledger }) => {
          const g = await submitAndGrant(ledger, { maxAttempts: 1 });
          await settleOk(ledger, g.ref, failed(errors.transient), 'exhaust');
          return { jobId: g.job.id, ref: g.ref };
        },
      ],
      [
        'failed/exhausted by an expired lease',
        async ({ ledger, clock }) => {
          const g = await submitAndGrant(ledger, { maxAttempts: 1 });
          clock.advance(TTL);
          assert.deepEqual((await ledger.sweep()).exhausted, [g.job.id]);
          return { jobId: g.job.id, ref: g.ref };
        },
      ],
      [
        'failed/cancelled while queued',
        async ({ ledger }) => {
          const job = await submitJob(ledger);
          assert.equal((await ledger.cancel({ jobId: job.id })).outcome, 'cancelled');
          return { jobId: job.id, ref: null };
        },
      ],
      [
        'failed/cancelled while running',
        async ({ ledger }) => {
          const g = await submitAndGrant(ledger);
          await ledger.cancel({ jobId: g.job.id });
          await settleOk(ledger, g.ref, failed(errors.transient), 'cancel_running');
          return { jobId: g.job.id, ref: g.ref };
        },
      ],
      [
        'failed/unroutable',
        async ({ ledger }) => {
          const job = await submitJob(ledger);
          assert.equal((await ledger.reject({ jobId: job.id, error: errors.unroutable })).rejected, true);
          return { jobId: job.id, ref: null };
        },
      ],
    ];

    for (const [label, end] of endings) {
      it(`a ${label} job refuses every operation and never changes`, () =>
        run(async (h) => {
          const { ledger, clock } = h;
          const { jobId, ref } = await end(h);
          await drainOutbox(ledger);
          const before = await snapshot(ledger, [jobId]);
          const job = await mustGetJob(ledger, jobId);
          const lease: LeaseRef = ref ?? { jobId, attempt: job.attempt, token: 'never-granted' };
          const endedReasons = ref ? ['ended'] : ['ended', 'superseded'];
          const attempts = [job.attempt, job.attempt + 1];
          for (const attempt of attempts) {
            const res = await ledger.grantLease({ jobId, attempt, worker: 'w9' });
            assert.equal(res.granted, false, `grant of attempt ${attempt}`);
          }
          expectGrantRefused(await ledger.grantLease({ jobId, attempt: job.attempt, worker: 'w9' }), 'ended');
          const renew = await ledger.renewLeases({ worker: 'w9', leases: [lease] });
          assert.deepEqual(renew.renewed, []);
          assert.equal(renew.lost.length, 1);
          assert.ok(endedReasons.includes(renew.lost[0]!.reason), `renew: ${renew.lost[0]!.reason}`);
          const check = await ledger.checkLease(lease);
          assert.equal(check.live, false);
          assert.ok(!check.live && endedReasons.includes(check.reason), `check: ${JSON.stringify(check)}`);
          const progress = await ledger.recordProgress({ ...lease, fraction: 0.9 });
          assert.ok(!progress.accepted && endedReasons.includes(progress.reason), `progress: ${JSON.stringify(progress)}`);
          for (const outcome of [finished({ late: true }), failed(errors.permanent), failed(errors.transient), failed(errors.fatal)]) {
            const res = await ledger.settle({ ...lease, outcome });
            assert.ok(!res.accepted && endedReasons.includes(res.reason), `settle: ${JSON.stringify(res)}`);
          }
          const cancel = await ledger.cancel({ jobId });
          assert.ok(cancel.outcome === 'refused' && cancel.reason === 'ended', `cancel: ${JSON.stringify(cancel)}`);
          assert.deepEqual(await ledger.reject({ jobId, error: errors.unroutable }), { rejected: false, reason: 'not_queued' });
          const again = await ledger.submit(submitParams({ idempotencyKey: freshKey() }));
          assert.notEqual(again.job.id, jobId);
          clock.advance(10 * TTL);
          const report = await ledger.sweep();
          const mentioned = [...report.requeued.map((r) => r.jobId), ...report.exhausted, ...report.cancelled, ...report.redispatched];
          assert.ok(!mentioned.includes(jobId), `the sweeper touched the ended job: ${JSON.stringify(report)}`);
          const after = await snapshot(ledger, [jobId]);
          assert.deepEqual((after as { jobs: unknown }).jobs, (before as { jobs: unknown }).jobs, 'the job and its attempts are unchanged');
          const rows = await drainOutbox(ledger);
          assert.deepEqual(
            rows.filter((r) => r.jobId === jobId),
            [],
            'no outbox row for the ended job',
          );
        }));
    }
  });
}
