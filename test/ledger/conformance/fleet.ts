/** Ledger conformance: the fleet (heartbeat, listFleet): one worker name, one process, on every orchestrator. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import type { HeartbeatParams, WorkerReport } from '../../../src/ledger/ledger.js';
import { expectLedgerError, mustGetJob, submitAndGrant } from '../testing.js';
import { TTL, type Run } from './helpers.js';

const WINDOW = 60_000;

function report(worker: string, overrides: Partial<WorkerReport> = {}): WorkerReport {
  return { worker, jobTypes: ['render'], capabilities: ['gpu'], heldBack: [{ type: 'transcode', missing: ['ffmpeg'] }], slots: 2, running: 0, ...overrides };
}

function beat(worker: string, proof: string, leases: HeartbeatParams['leases'] = [], overrides: Partial<WorkerReport> = {}): HeartbeatParams {
  return { worker, report: report(worker, { running: leases.length, ...overrides }), proof, windowMs: WINDOW, leases };
}

export function fleetConformance(run: Run): void {
  describe('fleet', () => {
    it('heartbeat records the report and renews the leases; listFleet lists who was heard within the window', () =>
      run(async ({ ledger, clock }) => {
        const g = await submitAndGrant(ledger, {}, 'w1');
        clock.advance(1_000);
        const heard = clock.now();
        const res = await ledger.heartbeat(beat('w1', 'p1', [g.ref]));
        assert.deepEqual(res, { recorded: true, heardAt: heard, renewed: [{ jobId: g.job.id, attempt: 1, deadline: heard + TTL }], lost: [] });
        assert.equal((await mustGetJob(ledger, g.job.id)).leaseDeadline, heard + TTL);
        await ledger.heartbeat(beat('w2', 'p2', [], { jobTypes: ['probe'], capabilities: [], heldBack: [] }));
        assert.deepEqual(await ledger.listFleet({ windowMs: WINDOW }), [
          { ...report('w1', { running: 1 }), lastHeartbeat: heard },
          { ...report('w2', { jobTypes: ['probe'], capabilities: [], heldBack: [] }), lastHeartbeat: heard },
        ]);
        clock.advance(WINDOW + 1);
        await ledger.heartbeat(beat('w2', 'p2', [], { slots: 5 }));
        assert.deepEqual(
          (await ledger.listFleet({ windowMs: WINDOW })).map((m) => [m.worker, m.slots, m.lastHeartbeat]),
          [['w2', 5, clock.now()]],
          'w1 left the window; w2 as it last reported',
        );
      }));

    it('a heartbeat with another proof for a name heard within the window is refused and renews nothing; the name is free once it left', () =>
      run(async ({ ledger, clock }) => {
        const g = await submitAndGrant(ledger, {}, 'w1');
        await ledger.heartbeat(beat('w1', 'p1', [g.ref]));
        const before = await ledger.listFleet({ windowMs: WINDOW });
        const deadline = (await mustGetJob(ledger, g.job.id)).leaseDeadline;
        clock.advance(WINDOW - 1);
        assert.deepEqual(await ledger.heartbeat(beat('w1', 'forged', [g.ref], { slots: 99 })), { recorded: false });
        assert.deepEqual(await ledger.listFleet({ windowMs: WINDOW }), before, 'the fleet row is unchanged');
        assert.equal((await mustGetJob(ledger, g.job.id)).leaseDeadline, deadline, 'no lease renewed');
        assert.equal((await ledger.heartbeat(beat('w1', 'p1'))).recorded, true, 'the same proof is the same worker');
        clock.advance(WINDOW);
        assert.equal((await ledger.heartbeat(beat('w1', 'p1-restarted'))).recorded, false, 'heard WINDOW ago: still held');
        clock.advance(1);
        assert.equal((await ledger.heartbeat(beat('w1', 'p1-restarted'))).recorded, true, 'left the window: the name is free');
        assert.equal((await ledger.heartbeat(beat('w1', 'p1'))).recorded, false, 'and now held by the new process');
      }));

    it('heartbeat and listFleet refuse bad input', () =>
      run(async ({ ledger }) => {
        await expectLedgerError(ledger.heartbeat({ ...beat('w1', 'p1'), windowMs: 0 }), 'invalid_input', 'no window');
        await expectLedgerError(ledger.heartbeat(beat('w1', '')), 'invalid_input', 'no proof');
        await expectLedgerError(ledger.heartbeat({ ...beat('w1', 'p1'), worker: 'w2' }), 'invalid_input', "another worker's report");
        await expectLedgerError(ledger.listFleet({ windowMs: -1 }), 'invalid_input', 'a negative window');
        assert.deepEqual(await ledger.listFleet({ windowMs: WINDOW }), []);
      }));
  });
}
