import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../core/clock.js';
import { LeaseBook } from './lease-book.js';

const granted = { jobId: 'j1', attempt: 1, token: 't1', tenant: 'acme' };

describe('LeaseBook.whenTakenUp (outputs wait for a grant a heartbeat renewed)', () => {
  it('resolves true once a heartbeat answer renews the grant', async () => {
    const clock = new ManualClock();
    const book = new LeaseBook(clock, 0.1);
    const lease = book.add(granted, clock.now(), 10_000);
    const waiting = book.whenTakenUp(lease);
    book.renewed('j1', 1, clock.now(), 10_000);
    assert.equal(await waiting, true);
    assert.equal(await book.whenTakenUp(lease), true, 'a grant taken up stays taken up');
  });

  it('resolves false when the lease is lost before any renewal (a superseded or expired grant)', async () => {
    const clock = new ManualClock();
    const book = new LeaseBook(clock, 0.1);
    const lease = book.add(granted, clock.now(), 10_000);
    const waiting = book.whenTakenUp(lease);
    lease.abort.abort(new Error('lease lost: superseded'));
    assert.equal(await waiting, false);
  });

  it('resolves false when the lease is removed, and at once for a lease past its local deadline', async () => {
    const clock = new ManualClock();
    const book = new LeaseBook(clock, 0.1);
    const lease = book.add(granted, clock.now(), 10_000);
    const waiting = book.whenTakenUp(lease);
    book.remove('j1');
    assert.equal(await waiting, false);
    const late = book.add(granted, clock.now(), 10_000);
    clock.advance(10_000);
    assert.equal(await book.whenTakenUp(late), false);
  });

  it('ignores a renewal of another attempt of the same job', async () => {
    const clock = new ManualClock();
    const book = new LeaseBook(clock, 0.1);
    const lease = book.add(granted, clock.now(), 10_000);
    const waiting = book.whenTakenUp(lease);
    book.renewed('j1', 2, clock.now(), 10_000);
    assert.equal(lease.takenUp, false);
    lease.abort.abort(new Error('lease lost'));
    assert.equal(await waiting, false);
  });
});
