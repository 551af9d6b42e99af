/**
 * An attempt's log on the worker: lines leave in batches, one batch in flight, and what
 * waits stays bounded however fast a job prints (the head kept, the oldest of the rest
 * dropped and counted, the count sent with the lines after it).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { LogsReply } from '../control/protocol.js';
import { logEntryBytes, logHeadBytes, logTailBytes, type LogDrop, type LogEntry } from '../wire/logs.js';
import { AttemptLog } from './attempt-log.js';

interface Sent {
  lines: LogEntry[];
  dropped?: LogDrop;
}

const accepted: LogsReply = { op: 'logs', jobId: 'j', attempt: 1, accepted: true };

function recorder(answer: () => Promise<LogsReply> = async () => accepted) {
  const sent: Sent[] = [];
  const refusals: string[] = [];
  const log = new AttemptLog({
    send: (batch) => {
      sent.push(batch);
      return answer();
    },
    now: () => 1000,
    flushMs: 10,
    refused: (reason) => refusals.push(reason),
    failed: () => undefined,
  });
  return { log, sent, refusals };
}

const line = (i: number) => `line ${String(i).padStart(7, '0')} `.padEnd(99, '.');

describe('AttemptLog', () => {
  it('sends a few lines together after the flush interval, with their stream and fields, and keeps the last ones for an error', async () => {
    const { log, sent } = recorder();
    log.add('stdout', 'one');
    log.add('stderr', 'two');
    log.add('log', 'three', { n: 3 });
    assert.equal(sent.length, 0, 'nothing leaves before the flush interval');
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.deepEqual(sent, [
      {
        lines: [
          { at: 1000, stream: 'stdout', message: 'one' },
          { at: 1000, stream: 'stderr', message: 'two' },
          { at: 1000, stream: 'log', message: 'three', fields: { n: 3 } },
        ],
      },
    ]);
    await log.close();
    assert.equal(sent.length, 1, 'nothing left to send');
    assert.equal(log.logTail(), 'one\ntwo\nthree');
  });

  it('printed faster than it sends: keeps the head, at most the last 1 MiB waiting, and sends the count of what it dropped before the lines after it', async () => {
    let release: () => void = () => undefined;
    // The first batch hangs until released: everything printed meanwhile must wait, bounded.
    let first = true;
    const { log, sent } = recorder(() => {
      if (!first) return Promise.resolve(accepted);
      first = false;
      return new Promise((resolve) => (release = () => resolve(accepted)));
    });
    const total = 50_000; // 5 MB
    for (let i = 0; i < total; i++) log.add('stdout', line(i));
    release();
    await log.close();
    const lines = sent.flatMap((batch) => batch.lines);
    const dropped = sent.reduce((sum, batch) => sum + (batch.dropped?.lines ?? 0), 0);
    assert.equal(lines.length + dropped, total, 'every line was sent or counted as dropped');
    const bytes = (entries: readonly LogEntry[]) => entries.reduce((sum, entry) => sum + logEntryBytes(entry), 0);
    assert.ok(bytes(lines) <= logHeadBytes + logTailBytes + 256 * 1024, `what was sent is bounded (${bytes(lines)} bytes)`);
    assert.equal(lines[0]!.message, line(0), 'the head is kept');
    assert.equal(lines.at(-1)!.message, line(total - 1), 'the last line is kept');
    const withDrop = sent.findIndex((batch) => batch.dropped !== undefined);
    assert.ok(withDrop > 0, 'the count went with a later batch');
    const firstAfterDrop = Number(/line (\d+)/.exec(sent[withDrop]!.lines[0]!.message)![1]);
    const lastBefore = Number(/line (\d+)/.exec(sent[withDrop - 1]!.lines.at(-1)!.message)![1]);
    assert.equal(firstAfterDrop - lastBefore - 1, sent[withDrop]!.dropped!.lines, 'the count is of the lines between');
    assert.ok(sent.every((batch) => batch.lines.length <= 5000));
  });

  it('a refusal stops it: the lease is lost, nothing more is sent', async () => {
    const { log, sent, refusals } = recorder(async () => ({ op: 'logs', jobId: 'j', attempt: 1, accepted: false, reason: 'superseded' }));
    log.add('stdout', 'first');
    await log.close();
    log.add('stdout', 'after');
    assert.deepEqual(refusals, ['superseded']);
    assert.equal(sent.length, 1);
  });
});
