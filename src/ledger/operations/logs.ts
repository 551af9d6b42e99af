/**
 * Job logs: each attempt's lines, kept bounded without rewriting what is kept.
 *
 * A batch of lines becomes at most two chunk rows: the lines that still fit in the first
 * logHeadBytes of the attempt's log (the head, kept for good), and the rest (the tail).
 * Once the tail holds more than logTailBytes, its oldest chunks are deleted as long as the
 * chunks left still hold logTailBytes, and counted as dropped in the attempt's summary row.
 * A batch so costs an insert or two, a small update and now and then a delete by key range,
 * never a rewrite of the megabyte kept; the tail holds logTailBytes plus at most one chunk,
 * which a whole read trims to logTailBytes exactly.
 *
 * appendLogs is fenced as a renewal is (leaseLoss): the lines of an attempt whose lease is
 * not live are refused, and change nothing. A requested cancel does not refuse them.
 */
import type { AppendLogsParams, AttemptLogs, FenceResult, ReadLogsParams } from '../ledger.js';
import { recordableLogLines } from '../shared/input-validation.js';
import { leaseLoss } from '../shared/lease-rules.js';
import { logEntryBytes, logHeadBytes, logTailBytes, type LogEntry } from '../../wire/logs.js';
import { LedgerError, LedgerErrorCode } from '../errors.js';
import { run, type OperationEnv, type Plan } from './plan.js';
import type { LogSummary } from './statements.js';

// Chunk rows the prune reads at a time: a batch usually pushes out one or two.
const PRUNE_READ = 32;

export function* appendLogs(params: AppendLogsParams, env: OperationEnv): Plan<FenceResult> {
  const lines = recordableLogLines(params.lines);
  const dropped = validDrop(params.dropped);
  const { jobId, attempt } = params;
  // Locked (where rows are): two batches of one attempt, a late one and the next, take turns.
  const reason = leaseLoss(yield* run('lockJob', { jobId }), params, env.now);
  if (reason) return { accepted: false, reason };
  const summary: LogSummary = (yield* run('selectLogSummary', { jobId, attempt })) ?? {
    jobId,
    attempt,
    headBytes: 0,
    headClosed: false,
    tailBytes: 0,
    droppedBytes: 0,
    droppedLines: 0,
    nextSeq: 1,
  };
  summary.droppedBytes += dropped.bytes;
  summary.droppedLines += dropped.lines;

  const head: LogEntry[] = [];
  const tail: LogEntry[] = [];
  let headBytes = 0;
  let tailBytes = 0;
  for (const line of lines) {
    const bytes = logEntryBytes(line);
    // Dropped lines come before these: the head is over, whatever room it has left.
    if (!summary.headClosed && dropped.lines === 0 && summary.headBytes + bytes <= logHeadBytes) {
      summary.headBytes += bytes;
      headBytes += bytes;
      head.push(line);
    } else {
      summary.headClosed = true;
      tailBytes += bytes;
      tail.push(line);
    }
  }
  if (dropped.lines > 0) summary.headClosed = true;
  for (const [section, chunk, bytes] of [['head', head, headBytes] as const, ['tail', tail, tailBytes] as const]) {
    if (chunk.length === 0) continue;
    yield* run('insertLogChunk', { jobId, attempt, seq: summary.nextSeq, section, bytes, lineCount: chunk.length, lines: JSON.stringify(chunk) });
    summary.nextSeq += 1;
  }
  summary.tailBytes += tailBytes;
  yield* pruneTail(summary);
  yield* run('upsertLogSummary', { ...summary, now: env.now });
  return { accepted: true };
}

/** Deletes the oldest tail chunks for as long as the ones left still hold logTailBytes. */
function* pruneTail(summary: LogSummary): Plan<void> {
  const { jobId, attempt } = summary;
  while (summary.tailBytes > logTailBytes) {
    const oldest = yield* run('selectOldestTailChunks', { jobId, attempt, limit: PRUNE_READ });
    let through: number | undefined;
    let more = true;
    for (const chunk of oldest) {
      if (summary.tailBytes - chunk.bytes < logTailBytes) {
        more = false;
        break;
      }
      summary.tailBytes -= chunk.bytes;
      summary.droppedBytes += chunk.bytes;
      summary.droppedLines += chunk.lineCount;
      through = chunk.seq;
    }
    if (through !== undefined) yield* run('deleteTailChunks', { jobId, attempt, throughSeq: through });
    if (!more || oldest.length < PRUNE_READ) return;
  }
}

export function* readLogs(params: ReadLogsParams): Plan<AttemptLogs> {
  const { jobId, attempt } = params;
  const afterSeq = params.afterSeq ?? 0;
  const chunks = yield* run('selectLogChunks', { jobId, attempt, afterSeq });
  const summary = yield* run('selectLogSummary', { jobId, attempt });
  const dropped = { bytes: summary?.droppedBytes ?? 0, lines: summary?.droppedLines ?? 0 };
  const head = chunks.filter((chunk) => chunk.section === 'head').flatMap((chunk) => chunk.lines);
  const tailChunks = chunks.filter((chunk) => chunk.section === 'tail');
  let tail = tailChunks.flatMap((chunk) => chunk.lines);
  const lastSeq = chunks.at(-1)?.seq ?? afterSeq;
  if (afterSeq === 0) {
    // Read whole: the tail is cut to its bound, line by line, and the cut counted as dropped.
    let excess = tailChunks.reduce((sum, chunk) => sum + chunk.bytes, 0) - logTailBytes;
    let cut = 0;
    while (excess > 0 && cut < tail.length) {
      const bytes = logEntryBytes(tail[cut]!);
      excess -= bytes;
      dropped.bytes += bytes;
      dropped.lines += 1;
      cut += 1;
    }
    tail = tail.slice(cut);
  }
  return { head, dropped, tail, lastSeq };
}

function validDrop(dropped: AppendLogsParams['dropped']): { bytes: number; lines: number } {
  if (dropped === undefined) return { bytes: 0, lines: 0 };
  const { bytes, lines } = dropped;
  if (!Number.isSafeInteger(bytes) || bytes < 0 || !Number.isSafeInteger(lines) || lines < 0) {
    throw new LedgerError(LedgerErrorCode.invalidInput, 'dropped must count bytes and lines, as whole numbers of at least 0');
  }
  return { bytes, lines };
}
