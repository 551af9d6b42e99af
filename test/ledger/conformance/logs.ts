/** Ledger conformance: job logs, kept per attempt as their first 64 KiB and last 1 MiB, fenced like a renewal. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import type { Ledger } from '../../../src/ledger/ledger.js';
import { logEntryBytes, logHeadBytes, logTailBytes, type LogEntry } from '../../../src/wire/logs.js';
import { errors, expectLedgerError, failed, settleOk, submitAndGrant } from '../testing.js';
import { TTL, reachAttempt2, type Run } from './helpers.js';

function lines(from: number, count: number, at: number, width = 100): LogEntry[] {
  return Array.from({ length: count }, (_, i) => ({ at, stream: i % 2 === 0 ? 'stdout' : 'stderr', message: `line ${from + i} `.padEnd(width, '.') }) as const);
}

const messages = (entries: readonly LogEntry[]) => entries.map((entry) => entry.message);

async function readAll(ledger: Ledger, jobId: string, attempt: number) {
  return ledger.readLogs({ jobId, attempt });
}

export function logsConformance(run: Run): void {
  describe('job logs', () => {
    it('keeps the lines of each attempt, in order, with their stream, time and fields; another attempt has its own', () =>
      run(async (h) => {
        const { ledger, clock } = h;
        const { first, second } = await reachAttempt2(h);
        assert.deepEqual(await ledger.appendLogs({ ...second.ref, lines: lines(0, 3, clock.now()) }), { accepted: true });
        const fields = { frame: 12, codec: 'h264' };
        assert.deepEqual(await ledger.appendLogs({ ...second.ref, lines: [{ at: clock.now() + 5, stream: 'log', message: 'encoded', fields }] }), {
          accepted: true,
        });
        const logs = await readAll(ledger, second.job.id, 2);
        assert.deepEqual(messages(logs.head), [...messages(lines(0, 3, 0)), 'encoded']);
        assert.deepEqual(logs.head[3], { at: clock.now() + 5, stream: 'log', message: 'encoded', fields });
        assert.equal(logs.head[1]!.stream, 'stderr');
        assert.deepEqual(logs.tail, []);
        assert.deepEqual(logs.dropped, { bytes: 0, lines: 0 });
        assert.equal(logs.lastSeq, 2, 'one chunk per batch');
        assert.deepEqual(
          await readAll(ledger, first.job.id, 1),
          { head: [], tail: [], dropped: { bytes: 0, lines: 0 }, lastSeq: 0 },
          'attempt 1 logged nothing',
        );
      }));

    it('keeps the first 64 KiB and the last 1 MiB, counting the lines between as dropped; read after a chunk, only the newer lines', () =>
      run(async (h) => {
        const { ledger, clock } = h;
        const { ref, job } = await submitAndGrant(ledger);
        const batch = 500; // 50,000 bytes a batch
        const total = 60; // 3 MB in all
        let lastSeqAfter10 = 0;
        for (let b = 0; b < total; b++) {
          assert.deepEqual(await ledger.appendLogs({ ...ref, lines: lines(b * batch, batch, clock.now()) }), { accepted: true });
          if (b === 9) lastSeqAfter10 = (await readAll(ledger, job.id, 1)).lastSeq;
        }
        const logs = await readAll(ledger, job.id, 1);
        const size = (entries: readonly LogEntry[]) => entries.reduce((sum, entry) => sum + logEntryBytes(entry), 0);
        assert.ok(size(logs.head) <= logHeadBytes && size(logs.head) > logHeadBytes - 101, `the head holds 64 KiB (${size(logs.head)} bytes)`);
        assert.ok(size(logs.tail) <= logTailBytes && size(logs.tail) > logTailBytes - 101, `the tail holds 1 MiB (${size(logs.tail)} bytes)`);
        assert.equal(logs.head[0]!.message, lines(0, 1, 0)[0]!.message, 'the head starts with the first line');
        assert.equal(logs.tail.at(-1)!.message, lines(batch * total - 1, 1, 0)[0]!.message, 'the tail ends with the last line');
        const all = batch * total;
        assert.equal(logs.head.length + logs.dropped.lines + logs.tail.length, all, 'every line is kept or counted as dropped');
        assert.equal(size(logs.head) + logs.dropped.bytes + size(logs.tail), all * 101, 'every byte is kept or counted as dropped');
        const firstTail = Number(/line (\d+)/.exec(logs.tail[0]!.message)![1]);
        assert.equal(firstTail, logs.head.length + logs.dropped.lines, 'the dropped lines are exactly those between head and tail');

        const newer = await ledger.readLogs({ jobId: job.id, attempt: 1, afterSeq: logs.lastSeq - 1 });
        assert.equal(newer.head.length, 0);
        assert.deepEqual(messages(newer.tail), messages(lines((total - 1) * batch, batch, 0)), 'after a chunk: the last batch only');
        assert.ok(lastSeqAfter10 > 0);
      }));

    it('adds what the worker dropped to the count, and closes the head', () =>
      run(async (h) => {
        const { ledger, clock } = h;
        const { ref, job } = await submitAndGrant(ledger);
        await ledger.appendLogs({ ...ref, lines: lines(0, 2, clock.now()) });
        await ledger.appendLogs({ ...ref, lines: lines(1000, 2, clock.now()), dropped: { bytes: 5000, lines: 50 } });
        const logs = await readAll(ledger, job.id, 1);
        assert.deepEqual(messages(logs.head), messages(lines(0, 2, 0)));
        assert.deepEqual(messages(logs.tail), messages(lines(1000, 2, 0)), 'lines after a drop are of the tail');
        assert.deepEqual(logs.dropped, { bytes: 5000, lines: 50 });
      }));

    it('refuses the lines of a lease that is not live, forged or expired, and keeps nothing of them; a cancel requested does not refuse them', () =>
      run(async (h) => {
        const { ledger, clock } = h;
        const { ref, job } = await submitAndGrant(ledger);
        assert.deepEqual(await ledger.appendLogs({ ...ref, token: 'forged', lines: lines(0, 1, 0) }), { accepted: false, reason: 'superseded' });
        assert.deepEqual(await ledger.appendLogs({ ...ref, jobId: 'nope', lines: lines(0, 1, 0) }), { accepted: false, reason: 'unknown_job' });
        await ledger.cancel({ jobId: job.id, tenant: job.tenant });
        assert.deepEqual(await ledger.appendLogs({ ...ref, lines: lines(7, 1, 0) }), { accepted: true }, 'a job stopping on a cancel still logs');
        clock.advance(TTL);
        assert.deepEqual(await ledger.appendLogs({ ...ref, lines: lines(8, 1, 0) }), { accepted: false, reason: 'expired' });
        assert.deepEqual(messages((await readAll(ledger, job.id, 1)).head), messages(lines(7, 1, 0)));
      }));

    it('refuses lines of a job that ended, and bad lines as invalid_input; a NUL in a message is replaced', () =>
      run(async (h) => {
        const { ledger, clock } = h;
        const { ref, job } = await submitAndGrant(ledger);
        await expectLedgerError(
          ledger.appendLogs({ ...ref, lines: [{ at: clock.now(), stream: 'nope' as 'log', message: 'x' }] }),
          'invalid_input',
          'an unknown stream',
        );
        await ledger.appendLogs({ ...ref, lines: [{ at: clock.now(), stream: 'stdout', message: 'a\u0000b' }] });
        assert.equal((await readAll(ledger, job.id, 1)).head[0]!.message, 'a\uFFFDb');
        await settleOk(ledger, ref, failed({ ...errors.permanent, logTail: 'last words\nand more' }), 'fail_permanent');
        assert.deepEqual(await ledger.appendLogs({ ...ref, lines: lines(0, 1, 0) }), { accepted: false, reason: 'ended' });
        const ended = await ledger.getJob(job.id);
        assert.equal(ended?.error?.logTail, 'last words\nand more', "the failed attempt's log tail is kept with the job's error");
        const [attempt] = await ledger.getAttempts(job.id);
        assert.equal(attempt?.error?.logTail, 'last words\nand more', '...and with the attempt');
      }));
  });
}
