import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../core/clock.js';
import { Admission, freeBytesMaxAgeMs } from './admission.js';

/** A scratch volume whose free space the test sets, counting how often it was measured. */
function volume(free: number) {
  const disk = { free, measures: 0 };
  const freeBytes = () => {
    disk.measures += 1;
    return Promise.resolve(disk.free);
  };
  return { disk, freeBytes };
}

describe('admission', () => {
  it('never admits more jobs than slots', async () => {
    const { freeBytes } = volume(1_000_000);
    const admission = new Admission(2, '/scratch', freeBytes);
    assert.deepEqual(await admission.admit('a', 10), { admitted: true });
    assert.deepEqual(await admission.admit('b', 10), { admitted: true });
    assert.deepEqual(await admission.admit('c', 10), { admitted: false, reason: 'no_free_slot' });
    admission.release('a');
    assert.deepEqual(await admission.admit('c', 10), { admitted: true });
  });

  it('lets a measure of the free space that has room answer for a second, then measures again', async () => {
    const clock = new ManualClock();
    const { disk, freeBytes } = volume(1_000_000);
    const admission = new Admission(8, '/scratch', freeBytes, () => clock.now());
    await admission.admit('a', 1000);
    clock.advance(freeBytesMaxAgeMs - 1);
    await admission.admit('b', 1000);
    assert.equal(disk.measures, 1, 'the second admission used the first measure');
    clock.advance(1);
    await admission.admit('c', 1000);
    assert.equal(disk.measures, 2, 'a measure a second old is taken again');
  });

  it('refuses only on a fresh measure, and counts every running job whole', async () => {
    const clock = new ManualClock();
    const { disk, freeBytes } = volume(2500);
    const admission = new Admission(8, '/scratch', freeBytes, () => clock.now());
    assert.deepEqual(await admission.admit('a', 1000), { admitted: true });
    assert.deepEqual(await admission.admit('b', 1000), { admitted: true });
    // 3,000 reserved against 2,500 remembered: measured again before the refusal.
    disk.free = 3000;
    assert.deepEqual(await admission.admit('c', 1000), { admitted: true });
    assert.equal(disk.measures, 2);
    disk.free = 3500;
    const refused = await admission.admit('d', 1000);
    assert.equal(disk.measures, 3);
    assert.deepEqual(refused, { admitted: false, reason: 'no_disk_reserve', detail: '3500 bytes free on /scratch, 4000 needed for 4 jobs' });
    assert.equal(admission.running, 3, 'the refused job holds no reservation');
  });

  it('gives back the slot when the free space cannot be measured', async () => {
    const admission = new Admission(1, '/scratch', () => Promise.reject(new Error('EIO')));
    await assert.rejects(admission.admit('a', 10), /EIO/);
    assert.equal(admission.running, 0);
  });
});
