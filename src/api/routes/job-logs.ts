import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { AttemptLogs, Job } from '../../ledger/ledger.js';
import { isTerminal } from '../../ledger/states.js';
import type { Orchestrator } from '../../orchestrator/orchestrator.js';
import { dropMarker, formatLogLine, toLogLine, type LogDrop, type LogLine } from '../../wire/logs.js';
import { visibleTenant, type KeyLookup } from '../auth.js';
import { ApiError, ApiErrorCode, errorSchema, jobNotFound } from '../errors.js';
import type { EventStream, OpenEventStreams } from '../sse.js';
import { endUnlessActive } from './job-events.js';

interface LogsQuery {
  format: 'jsonl' | 'text';
  follow?: '1' | 'true' | '0' | 'false';
}

const logsQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    format: { type: 'string', enum: ['jsonl', 'text'], default: 'jsonl', description: 'JSON lines (default) or plain text, one line each' },
    follow: {
      type: 'string',
      enum: ['1', 'true', '0', 'false'],
      description: '1: server-sent `line` events, the lines kept so far and then each new one, until the attempt ends (an `end` event)',
    },
  },
} as const;

const logsParams = {
  type: 'object',
  required: ['id', 'n'],
  properties: {
    id: { type: 'string', minLength: 1, maxLength: 100 },
    n: { type: 'integer', minimum: 1, maximum: 1_000_000, description: 'the attempt, from 1' },
  },
} as const;

/**
 * `GET /v1/jobs/:id/attempts/:n/logs`: what attempt `n` of a job printed (stdout, stderr)
 * and logged (`ctx.log`), as kept: its first 64 KiB, a `planrun` marker line saying what
 * was dropped, and its last 1 MiB. Another tenant's job is answered 404, as a missing one;
 * an attempt the job has not reached, 404 too. With `follow=1`, server-sent `line` events
 * (each a LogLine as JSON) while the attempt runs, then one `end` event.
 */
export function registerJobLogRoutes(scope: FastifyInstance, orchestrator: Orchestrator, streams: OpenEventStreams, keys: KeyLookup, pollMs: number): void {
  const { ledger } = orchestrator;
  scope.get<{ Params: { id: string; n: number }; Querystring: LogsQuery }>(
    '/jobs/:id/attempts/:n/logs',
    {
      exposeHeadRoute: false,
      schema: {
        summary: 'What an attempt of a job printed: its first 64 KiB and last 1 MiB, or followed live',
        tags: ['jobs'],
        params: logsParams,
        querystring: logsQuery,
        response: {
          200: {
            description:
              'JSON lines (`{"time","stream","message","fields"?,"dropped"?}`; stream is stdout, stderr, log or planrun for the marker of dropped lines), plain text (`<time> <stream> <message>`), or with follow=1 server-sent `line` events (data: one such JSON line) and a last `end` event',
            content: {
              'application/x-ndjson': { schema: { type: 'string' } },
              'text/plain': { schema: { type: 'string' } },
              'text/event-stream': { schema: { type: 'string' } },
            },
          },
          400: errorSchema,
          401: errorSchema,
          404: errorSchema,
        },
      },
    },
    async (request, reply) => {
      const { id, n } = request.params;
      const tenant = visibleTenant(request.caller);
      const job = await ledger.getJob(id, tenant);
      if (!job) throw jobNotFound(id);
      if (n > job.attempt) throw new ApiError(404, ApiErrorCode.notFound, `job ${id} has no attempt ${n} (it is at attempt ${job.attempt})`);
      if (request.query.follow === '1' || request.query.follow === 'true') {
        const stream = streams.start(reply);
        const keyId = request.caller.id;
        stream.onHeartbeat(() => void endUnlessActive(stream, keys, keyId, request.log));
        await follow({
          stream,
          pollMs,
          log: request.log,
          jobId: id,
          attempt: n,
          readJob: () => ledger.getJob(id, tenant),
          readLogs: (afterSeq) => ledger.readLogs({ jobId: id, attempt: n, afterSeq }),
        });
        return;
      }
      const lines = linesOf(await ledger.readLogs({ jobId: id, attempt: n }));
      if (request.query.format === 'text') return reply.type('text/plain; charset=utf-8').send(lines.map((line) => `${formatLogLine(line)}\n`).join(''));
      return reply.type('application/x-ndjson; charset=utf-8').send(lines.map((line) => `${JSON.stringify(line)}\n`).join(''));
    },
  );
}

/** The lines as served: the head, the marker of what was dropped (if anything was), the tail. */
function linesOf(logs: AttemptLogs): LogLine[] {
  const lines = logs.head.map(toLogLine);
  if (logs.dropped.lines > 0) lines.push(dropMarker(logs.dropped, logs.tail[0]?.at ?? logs.head.at(-1)?.at ?? Date.now()));
  for (const entry of logs.tail) lines.push(toLogLine(entry));
  return lines;
}

interface Following {
  stream: EventStream;
  pollMs: number;
  log: FastifyBaseLogger;
  jobId: string;
  attempt: number;
  readJob(): Promise<Job | undefined>;
  readLogs(afterSeq: number): Promise<AttemptLogs>;
}

/**
 * Sends the lines kept so far, then looks for newer ones every `pollMs` until the attempt
 * is over (the job moved on to another attempt or ended), and reads once more after that:
 * a worker sends an attempt's last lines before it settles it, so nothing comes later.
 * Lines pruned before this follower read them (a job printing faster than it polls) are
 * told by a marker line.
 */
async function follow(f: Following): Promise<void> {
  const { stream } = f;
  try {
    const first = await f.readLogs(0);
    for (const line of linesOf(first)) stream.send('line', line);
    let lastSeq = first.lastSeq;
    let shownDrop: LogDrop = first.dropped;
    for (;;) {
      const job = await f.readJob();
      const over = !job || job.attempt > f.attempt || isTerminal(job.state);
      const newer = await f.readLogs(lastSeq);
      const unseen = { bytes: newer.dropped.bytes - shownDrop.bytes, lines: newer.dropped.lines - shownDrop.lines };
      if (unseen.lines > 0) {
        stream.send('line', dropMarker(unseen, (newer.head[0] ?? newer.tail[0])?.at ?? Date.now()));
        shownDrop = newer.dropped;
      }
      for (const entry of [...newer.head, ...newer.tail]) stream.send('line', toLogLine(entry));
      lastSeq = newer.lastSeq;
      if (over || stream.closed) {
        if (!stream.closed) stream.send('end', { jobId: f.jobId, attempt: f.attempt, state: job?.state ?? null });
        return;
      }
      await pause(f.pollMs, stream);
    }
  } catch (error) {
    // The response is already streaming: the client sees the stream end and reads again.
    f.log.warn({ err: error, jobId: f.jobId, attempt: f.attempt }, 'log stream ended by an error');
  } finally {
    stream.end();
  }
}

/** Waits `ms`, or less if the stream closes meanwhile. */
function pause(ms: number, stream: EventStream): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    stream.onClose(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}
