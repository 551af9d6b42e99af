import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { Job } from '../../ledger/ledger.js';
import { isTerminal } from '../../ledger/states.js';
import type { Orchestrator } from '../../orchestrator/orchestrator.js';
import type { JobEvent } from '../../wire/jobs.js';
import { visibleTenant, type KeyLookup } from '../auth.js';
import { errorSchema, jobNotFound } from '../errors.js';
import { toJobSummary } from '../job-view.js';
import type { EventStream, OpenEventStreams } from '../sse.js';
import { jobIdParams } from './jobs.js';

/**
 * `GET /v1/jobs/:id/events`: server-sent events, each one's data the job as it stands
 * (the summary of `GET /v1/jobs/:id`, without attempts):
 *
 * - `state` at once on connect, then whenever the state, the attempt or a cancel request
 *   changes;
 * - `progress` when only the progress or its message changed;
 * - the last event is a `state` event with state `finished` or `failed`, after which the
 *   server ends the stream (a client that connects after the end gets just that event).
 *
 * Change notifications only say "look again": every event is read from the ledger, so a
 * stream never shows a state that was not committed, and notifications that come close
 * together make one read.
 *
 * A stream whose key is revoked ends at its next heartbeat: keys are revoked by another
 * process (`planrun keys revoke`), so the stream asks the key store rather than waits to be told.
 */
export function registerJobEventRoutes(scope: FastifyInstance, orchestrator: Orchestrator, streams: OpenEventStreams, keys: KeyLookup): void {
  scope.get<{ Params: { id: string } }>(
    '/jobs/:id/events',
    {
      // A HEAD request would open a stream with no body to carry it.
      exposeHeadRoute: false,
      schema: {
        summary: "A job's state and progress as server-sent events, until it ends",
        tags: ['jobs'],
        params: jobIdParams,
        response: {
          200: {
            description: 'server-sent `state` and `progress` events, each one carrying the job as JSON',
            content: { 'text/event-stream': { schema: { type: 'string' } } },
          },
          401: errorSchema,
          404: errorSchema,
        },
      },
    },
    async (request, reply) => {
      const { id } = request.params;
      const changed = new ChangeSignal();
      // Listening starts before the first read, so no change in between goes unseen.
      const stopListening = orchestrator.events.onJob(id, () => changed.notify());
      try {
        const job = await orchestrator.ledger.getJob(id, visibleTenant(request.caller));
        if (!job) throw jobNotFound(id);
        const stream = streams.start(reply);
        const keyId = request.caller.id;
        stream.onHeartbeat(() => void endUnlessActive(stream, keys, keyId, request.log));
        const read = (jobId: string) => orchestrator.ledger.getJob(jobId, visibleTenant(request.caller));
        await follow(job, stream, changed, read, request.log, () => orchestrator.clock.now());
      } finally {
        stopListening();
      }
    },
  );
}

/** Ends `stream` once its key is revoked (asked at each heartbeat). */
export async function endUnlessActive(stream: EventStream, keys: KeyLookup, keyId: string, log: FastifyBaseLogger): Promise<void> {
  try {
    if (!(await keys.isActive(keyId))) stream.end();
  } catch (error) {
    // The key store cannot answer now: the stream goes on, and the next heartbeat asks again.
    log.warn({ err: error, keyId }, "cannot check whether an event stream's key is still active");
  }
}

async function follow(
  first: Job,
  stream: EventStream,
  changed: ChangeSignal,
  read: (jobId: string) => Promise<Job | undefined>,
  log: FastifyBaseLogger,
  now: () => number,
): Promise<void> {
  stream.onClose(() => changed.notify());
  // A backstop for changes this process did not hear of (made through another orchestrator
  // sharing the ledger while the ledger's change feed was down): look again at every heartbeat.
  stream.onHeartbeat(() => changed.notify());
  let shown = first;
  stream.send('state', toJobSummary(shown, now()));
  try {
    while (!isTerminal(shown.state)) {
      await changed.next();
      if (stream.closed) return;
      const job = await read(shown.id);
      if (!job) return;
      const event = eventFor(shown, job);
      if (event) stream.send(event, toJobSummary(job, now()));
      shown = job;
    }
  } catch (error) {
    // The response is already streaming: the client sees the stream end and reconnects.
    log.warn({ err: error, jobId: shown.id }, 'job event stream ended by an error');
  } finally {
    stream.end();
  }
}

function eventFor(before: Job, after: Job): JobEvent['type'] | undefined {
  if (after.state !== before.state || after.attempt !== before.attempt || after.cancelRequested !== before.cancelRequested) return 'state';
  if (after.progress !== before.progress || after.progressMessage !== before.progressMessage) return 'progress';
  return undefined;
}

/** "Something changed since you last looked": any number of notifications wake one `next`. */
class ChangeSignal {
  private pending = false;
  private wake: (() => void) | undefined;

  notify(): void {
    this.pending = true;
    this.wake?.();
  }

  async next(): Promise<void> {
    if (!this.pending) await new Promise<void>((resolve) => (this.wake = resolve));
    this.wake = undefined;
    this.pending = false;
  }
}
