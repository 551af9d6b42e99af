import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ManualClock } from '../core/clock.js';
import type { Ledger } from '../ledger/ledger.js';
import { openSqliteLedger } from '../ledger/sqlite/sqlite-ledger.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { ControlHandler } from './control-handler.js';
import { Fleet } from './fleet.js';

const secret = 'secret-of-worker-process-w1-0123';

describe('the control handler addresses a job by (id, tenant)', () => {
  const dir = tempDir();
  const clock = new ManualClock();
  let ledger: Ledger;
  let handler: ControlHandler;

  before(async () => {
    ledger = await openSqliteLedger({ path: join(dir.path, 'ledger.db'), clock, config: { leaseTtlMs: 1000 } });
    handler = new ControlHandler(ledger, new Fleet(clock, 60_000), { leaseTtlMs: 1000 });
  });
  after(async () => {
    await ledger.close();
    dir.remove();
  });

  it('a request naming another tenant is answered as if the job did not exist, and changes nothing', async () => {
    const { job } = await ledger.submit({ tenant: 'acme', type: 'probe', input: {} });
    const wrong = await handler.handle({ op: 'lease', jobId: job.id, attempt: 1, tenant: 'other', worker: 'w1', secret });
    assert.deepEqual(wrong, { op: 'lease', jobId: job.id, attempt: 1, granted: false, reason: 'unknown_job' });
    assert.equal((await ledger.getJob(job.id))?.state, 'queued');

    const right = await handler.handle({ op: 'lease', jobId: job.id, attempt: 1, tenant: 'acme', worker: 'w1', secret });
    assert.ok(right.op === 'lease' && right.granted);
    const ref = { jobId: job.id, attempt: 1, token: right.token };
    const outcome = { kind: 'finished' as const, result: {} };
    assert.deepEqual(await handler.handle({ op: 'fence', ...ref, tenant: 'other' }), {
      op: 'fence',
      jobId: job.id,
      attempt: 1,
      live: false,
      reason: 'unknown_job',
    });
    assert.deepEqual(await handler.handle({ op: 'progress', ...ref, tenant: 'other', fraction: 0.5 }), {
      op: 'progress',
      jobId: job.id,
      attempt: 1,
      accepted: false,
      reason: 'unknown_job',
    });
    assert.deepEqual(await handler.handle({ op: 'settle', ...ref, tenant: 'other', outcome }), {
      op: 'settle',
      jobId: job.id,
      attempt: 1,
      accepted: false,
      reason: 'unknown_job',
    });
    assert.equal((await ledger.getJob(job.id))?.state, 'running');
  });

  it('a lease is given again to the process that holds it (same worker, same secret), and to nobody else who names that worker', async () => {
    const { job } = await ledger.submit({ tenant: 'acme', type: 'probe', input: {} });
    const lease = { op: 'lease', jobId: job.id, attempt: 1, tenant: 'acme', worker: 'w1' } as const;
    const first = await handler.handle({ ...lease, secret });
    assert.ok(first.op === 'lease' && first.granted);
    const again = await handler.handle({ ...lease, secret });
    assert.ok(again.op === 'lease' && again.granted && again.token === first.token, 'its lost answer, given again');
    const impostor = await handler.handle({ ...lease, secret: 'another-process-secret-0123456' });
    assert.deepEqual(impostor, { op: 'lease', jobId: job.id, attempt: 1, granted: false, reason: 'already_running' });
    assert.equal((await ledger.getAttempts(job.id)).length, 1);
  });

  it('a request that does not follow the protocol is answered invalid_request, naming the field', async () => {
    const answer = await handler.handle({ op: 'lease', jobId: 'j', attempt: 0, tenant: 'acme', worker: 'w1', secret });
    assert.equal(answer.op, 'error');
    assert.ok(answer.op === 'error' && answer.code === 'invalid_request' && /attempt/.test(answer.message));
  });
});
