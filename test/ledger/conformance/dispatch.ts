/**
 * Ledger conformance: fair dispatch (dispatch.ts). In fair mode a job's work message is
 * written by a dispatch pass, when a worker of its type has a free slot and no limit holds
 * it back, in weighted fair shares between tenants, higher priority first within one; the
 * pass sweeps first, so that what expired leases held is free in the same pass.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import type { DispatchReport, Job, Ledger, SubmitParams } from '../../../src/ledger/ledger.js';
import { drainOutbox, errors, expectGranted, failed, finished, grant, mustGetJob, proofOf, settleOk, submitJob, testConfig, workRows } from '../testing.js';
import { BASE, TTL, type Run } from './helpers.js';

const fair = { ...testConfig, dispatch: 'fair' } as const;
const WINDOW = 60_000;

/** Records a worker of `types` with `slots` slots in the fleet. */
async function worker(ledger: Ledger, name: string, types: string[], slots: number): Promise<void> {
  const report = { worker: name, jobTypes: types, capabilities: ['ffmpeg'], heldBack: [], slots, running: 0 };
  const heard = await ledger.heartbeat({ worker: name, report, proof: proofOf(name), windowMs: WINDOW, leases: [] });
  assert.equal(heard.recorded, true);
}

const pass = (ledger: Ledger): Promise<DispatchReport> => ledger.dispatch({ fleetWindowMs: WINDOW });
const released = (report: DispatchReport): string[] => report.released.map((r) => r.jobId);

async function submitAll(ledger: Ledger, n: number, overrides: Partial<SubmitParams>): Promise<Job[]> {
  const jobs: Job[] = [];
  for (let i = 0; i < n; i++) jobs.push(await submitJob(ledger, overrides));
  return jobs;
}

export function dispatchConformance(run: Run): void {
  describe('dispatch (fair)', () => {
    it('a submitted job has no work message until a worker of its type has a free slot; then one per slot', () =>
      run(async ({ ledger }) => {
        const jobs = await submitAll(ledger, 3, {});
        assert.deepEqual(await drainOutbox(ledger), [], 'nothing in flight at submit');
        assert.equal(await ledger.waitingFor(jobs[0]!.id), 'no_free_slot');
        assert.deepEqual(released(await pass(ledger)), [], 'no worker: nothing released');

        await worker(ledger, 'w1', ['transcode'], 2);
        assert.deepEqual(released(await pass(ledger)), [jobs[0]!.id, jobs[1]!.id], 'two slots: the two oldest');
        assert.deepEqual(
          workRows(await drainOutbox(ledger)).map((r) => [r.jobId, r.body.attempt]),
          [
            [jobs[0]!.id, 1],
            [jobs[1]!.id, 1],
          ],
        );
        assert.equal(await ledger.waitingFor(jobs[0]!.id), null, 'released: not waiting');
        assert.deepEqual(released(await pass(ledger)), [], 'released, unleased work holds its slot');

        const first = await grant(ledger, jobs[0]!.id, 'w1');
        assert.deepEqual(released(await pass(ledger)), [], 'a lease holds its slot too');
        await settleOk(ledger, first.ref, finished());
        assert.deepEqual(released(await pass(ledger)), [jobs[2]!.id], 'a settle frees one slot');
      }, fair));

    it('shares a type between tenants by weight, whoever submitted first', () =>
      run(async ({ ledger }) => {
        const a = await submitAll(ledger, 6, { tenant: 'acme' });
        const b = await submitAll(ledger, 3, { tenant: 'globex' });
        await worker(ledger, 'w1', ['transcode'], 2);
        assert.deepEqual(released(await pass(ledger)), [a[0]!.id, b[0]!.id], 'equal weights: one each');

        await ledger.setTenantWeight({ tenant: 'acme', weight: 3 });
        await worker(ledger, 'w2', ['transcode'], 4);
        const report = await pass(ledger);
        assert.deepEqual(
          report.released.map((r) => r.tenant),
          ['acme', 'acme', 'acme', 'globex'],
          'weight 3 against 1: acme comes to 4 of 6 slots, globex to 2',
        );
      }, fair));

    it('higher priority first within a tenant', () =>
      run(async ({ ledger }) => {
        const low = await submitJob(ledger, { priority: -1 });
        const plain = await submitJob(ledger, {});
        const high = await submitJob(ledger, { priority: 5 });
        await worker(ledger, 'w1', ['transcode'], 2);
        assert.deepEqual(released(await pass(ledger)), [high.id, plain.id]);
        assert.equal(await ledger.waitingFor(low.id), 'no_free_slot');
      }, fair));

    it('holds a tenant at its limit, a (tenant, type) at its own, and a type at its own', () =>
      run(async ({ ledger }) => {
        await ledger.setRunningLimit({ tenant: 'acme', maxRunning: 2 });
        await ledger.setRunningLimit({ tenant: 'globex', type: 'transcode', maxRunning: 1 });
        await ledger.setRunningLimit({ type: 'render', maxRunning: 1 });
        const a = await submitAll(ledger, 3, { tenant: 'acme' });
        const g = await submitAll(ledger, 2, { tenant: 'globex' });
        const r = await submitAll(ledger, 2, { tenant: 'initech', type: 'render' });
        await worker(ledger, 'w1', ['transcode', 'render'], 10);
        const report = await pass(ledger);
        assert.deepEqual(released(report).sort(), [a[0]!.id, a[1]!.id, g[0]!.id, r[0]!.id].sort());
        assert.equal(await ledger.waitingFor(a[2]!.id), 'tenant_limit');
        assert.equal(await ledger.waitingFor(g[1]!.id), 'tenant_limit');
        assert.equal(await ledger.waitingFor(r[1]!.id), 'no_free_slot', "the type's own limit: no slot for it");

        await ledger.setRunningLimit({ tenant: 'acme', maxRunning: null });
        assert.deepEqual(released(await pass(ledger)), [a[2]!.id], 'a limit removed frees its jobs');
        const state = await ledger.dispatchState();
        assert.deepEqual(state.limits, [
          { tenant: '', type: 'render', maxRunning: 1 },
          { tenant: 'globex', type: 'transcode', maxRunning: 1 },
        ]);
      }, fair));

    it("runs at most a concurrency key's limit of its tenant's jobs at once, and steps over them to the next", () =>
      run(async ({ ledger }) => {
        const k1 = await submitJob(ledger, { concurrencyKey: 'video-91' });
        const k2 = await submitJob(ledger, { concurrencyKey: 'video-91' });
        const other = await submitJob(ledger, {});
        const pair = await submitAll(ledger, 3, { concurrencyKey: 'video-92', concurrencyLimit: 2 });
        const elsewhere = await submitJob(ledger, { tenant: 'globex', concurrencyKey: 'video-91' });
        await worker(ledger, 'w1', ['transcode'], 10);
        assert.deepEqual(released(await pass(ledger)).sort(), [k1.id, other.id, pair[0]!.id, pair[1]!.id, elsewhere.id].sort());
        assert.equal(await ledger.waitingFor(k2.id), 'concurrency_key');
        assert.equal(await ledger.waitingFor(pair[2]!.id), 'concurrency_key');
        const g = await grant(ledger, k1.id, 'w1');
        await settleOk(ledger, g.ref, finished());
        assert.deepEqual(released(await pass(ledger)), [k2.id], 'the key is free again');
      }, fair));

    it('reaps before it counts: capacity held by expired leases is released in the same pass (seed 003)', () =>
      run(async ({ ledger, clock }) => {
        await ledger.setRunningLimit({ tenant: 'acme', maxRunning: 3 });
        const jobs = await submitAll(ledger, 6, { tenant: 'acme' });
        await worker(ledger, 'w1', ['transcode'], 3);
        await worker(ledger, 'w2', ['transcode'], 3);
        assert.equal((await pass(ledger)).released.length, 3);
        for (const job of jobs.slice(0, 3)) await grant(ledger, job.id, 'w1');
        assert.deepEqual(released(await pass(ledger)), [], 'at the limit');
        // w1 dies: its three leases are orphaned. Without reaping, the limit would hold forever.
        clock.advance(TTL);
        await worker(ledger, 'w2', ['transcode'], 3);
        const report = await pass(ledger);
        assert.deepEqual(
          report.requeued.map((r) => r.jobId).sort(),
          jobs
            .slice(0, 3)
            .map((j) => j.id)
            .sort(),
          'reaped',
        );
        assert.deepEqual(
          released(report),
          jobs.slice(3).map((j) => j.id),
          'and the freed capacity used in the same pass',
        );
        clock.advance(BASE);
        await pass(ledger);
        assert.equal(await ledger.waitingFor(jobs[0]!.id), 'tenant_limit', 'the reaped jobs wait their turn at attempt 2');
      }, fair));

    it('a pass without the sweep leaves expired leases to the next sweep but counts none of them', () =>
      run(async ({ ledger, clock }) => {
        const jobs = await submitAll(ledger, 4, {});
        await worker(ledger, 'w1', ['transcode'], 1);
        assert.deepEqual(released(await pass(ledger)), [jobs[0]!.id]);
        await grant(ledger, jobs[0]!.id, 'w1');
        // The lease runs out (its worker died); the fleet stays at one slot, counted twice with one ahead.
        clock.advance(TTL);
        await worker(ledger, 'w1', ['transcode'], 1);
        const releaseOnly = await ledger.dispatch({ fleetWindowMs: WINDOW, aheadPerSlot: 1, sweep: false });
        assert.deepEqual(
          [releaseOnly.abandoned, releaseOnly.requeued, releaseOnly.exhausted, releaseOnly.cancelled, releaseOnly.redispatched],
          [[], [], [], [], []],
          'nothing swept',
        );
        assert.deepEqual(released(releaseOnly), [jobs[1]!.id, jobs[2]!.id], 'the expired lease holds no slot: both of the round go out');
        assert.equal((await mustGetJob(ledger, jobs[0]!.id)).state, 'running', 'left for the sweep');
        assert.deepEqual([releaseOnly.waiting, releaseOnly.slotsFull], [true, true], 'one job waits, for a slot');
        const swept = await ledger.dispatch({ fleetWindowMs: WINDOW, aheadPerSlot: 1 });
        assert.deepEqual(
          swept.requeued.map((r) => r.jobId),
          [jobs[0]!.id],
          'the next whole pass sweeps it',
        );
      }, fair));

    it('reports what still waits after a pass, and whether only slots hold it back', () =>
      run(async ({ ledger }) => {
        const left = ({ waiting, slotsFull }: DispatchReport) => ({ waiting, slotsFull });
        await submitAll(ledger, 3, {});
        assert.deepEqual(left(await pass(ledger)), { waiting: true, slotsFull: true }, 'no worker: no slot');
        await worker(ledger, 'w1', ['transcode'], 5);
        assert.deepEqual(left(await pass(ledger)), { waiting: false, slotsFull: false }, 'all released');
        await ledger.setRunningLimit({ tenant: 'acme', maxRunning: 3 });
        await submitAll(ledger, 2, {});
        assert.deepEqual(left(await pass(ledger)), { waiting: true, slotsFull: false }, 'held by the limit while slots are free');
      }, fair));

    it('a requeued attempt waits for the dispatcher, after its backoff', () =>
      run(async ({ ledger, clock }) => {
        await worker(ledger, 'w1', ['transcode'], 1);
        const job = await submitJob(ledger, {});
        await pass(ledger);
        await drainOutbox(ledger);
        const g = await grant(ledger, job.id, 'w1');
        await settleOk(ledger, g.ref, failed(errors.transient), 'retry');
        assert.deepEqual(await drainOutbox(ledger), [], 'no work message for attempt 2 at the retry');
        assert.deepEqual(released(await pass(ledger)), [], 'not before the backoff');
        assert.equal(await ledger.waitingFor(job.id), 'scheduled');
        clock.advance(BASE);
        assert.deepEqual(await pass(ledger).then((r) => r.released), [{ jobId: job.id, attempt: 2, tenant: 'acme', type: 'transcode' }]);
        expectGranted(await ledger.grantLease({ jobId: job.id, attempt: 2, worker: 'w1' }));
      }, fair));

    it('delayed jobs: scheduled until runAt or delaySeconds, then released; cancel works before', () =>
      run(async ({ ledger, clock }) => {
        await worker(ledger, 'w1', ['transcode'], 5);
        const later = await submitJob(ledger, { delaySeconds: 30 });
        const at = await submitJob(ledger, { runAt: clock.now() + 60_000 });
        const cancelled = await submitJob(ledger, { delaySeconds: 30 });
        assert.equal(later.notBefore, clock.now() + 30_000);
        assert.equal(await ledger.waitingFor(later.id), 'scheduled');
        assert.deepEqual(released(await pass(ledger)), []);
        assert.equal((await ledger.cancel({ jobId: cancelled.id })).outcome, 'cancelled');
        clock.advance(30_000);
        assert.deepEqual(released(await pass(ledger)), [later.id]);
        assert.equal(await ledger.waitingFor(at.id), 'scheduled');
        clock.advance(30_000);
        assert.deepEqual(released(await pass(ledger)), [at.id]);
        await assert.rejects(ledger.submit({ tenant: 'acme', type: 'transcode', input: {}, runAt: 1, delaySeconds: 1 }), /runAt or delaySeconds/);
        await assert.rejects(ledger.submit({ tenant: 'acme', type: 'transcode', input: {}, concurrencyLimit: 2 }), /needs a concurrencyKey/);
      }, fair));

    it('a released message gone unleased is sent again; a waiting job never is', () =>
      run(async ({ ledger, clock }) => {
        await worker(ledger, 'w1', ['transcode'], 1);
        const [sent, waiting] = await submitAll(ledger, 2, {});
        await pass(ledger);
        await drainOutbox(ledger);
        clock.advance(testConfig.redispatchAfterMs);
        await worker(ledger, 'w1', ['transcode'], 1);
        const report = await pass(ledger);
        assert.deepEqual(report.redispatched, [sent!.id]);
        assert.deepEqual(
          workRows(await drainOutbox(ledger)).map((r) => r.jobId),
          [sent!.id],
        );
        assert.equal((await mustGetJob(ledger, waiting!.id)).state, 'queued');
        assert.equal(await ledger.waitingFor(waiting!.id), 'no_free_slot');
      }, fair));

    it('dispatchState counts waiting jobs and live leases per tenant and type', () =>
      run(async ({ ledger }) => {
        await ledger.setTenantWeight({ tenant: 'acme', weight: 2 });
        await worker(ledger, 'w1', ['transcode'], 1);
        const jobs = await submitAll(ledger, 3, {});
        await pass(ledger);
        await grant(ledger, jobs[0]!.id, 'w1');
        assert.deepEqual(await ledger.dispatchState(), {
          weights: [{ tenant: 'acme', weight: 2 }],
          limits: [],
          usage: [{ tenant: 'acme', type: 'transcode', queued: 2, running: 1 }],
        });
        await assert.rejects(ledger.setTenantWeight({ tenant: 'acme', weight: 0 }), /weight/);
        await assert.rejects(ledger.setRunningLimit({ maxRunning: 1 }), /tenant, a type, or both/);
      }, fair));

    it('fifo: the work message is written at submit, due at runAt', () =>
      run(async ({ ledger, clock }) => {
        const job = await submitJob(ledger, { delaySeconds: 10 });
        assert.deepEqual(await drainOutbox(ledger), []);
        clock.advance(10_000);
        assert.deepEqual(
          workRows(await drainOutbox(ledger)).map((r) => r.jobId),
          [job.id],
        );
        assert.deepEqual((await pass(ledger)).released, [], 'nothing for the dispatcher to release');
      }));
  });
}
