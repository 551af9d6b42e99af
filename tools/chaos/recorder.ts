/**
 * What `planrun orchestrator` and `planrun worker` record for a chaos run: the chaos runner
 * names this module in PLANRUN_INSTRUMENT (planrun's instrument hook, src/cli/instrument.ts)
 * and the folder in PLANRUN_CHAOS_HISTORY; nobody else should.
 *
 * - the orchestrator: every control request it answered, with the answer (lease granted
 *   or refused, heartbeat renewals and losses, fence, progress, settle accepted or
 *   refused), every outbox publish with its outcome (confirmed or not), every submission
 *   delivered from the submit queue;
 * - a worker: its WorkerEvent stream (deliveries dropped as duplicates, leases, outputs
 *   stored, settles, fences...) and every work message delivered to it;
 * - both: their broker connection's incidents (lost, restored, consumer interrupted).
 *
 * It wraps the process's Broker and changes nothing it does.
 */
import type {
  Broker,
  BrokerEvent,
  ConsumeOptions,
  DeliveryHandler,
  PublishOptions,
  RequestHandler,
  RequestOptions,
  ServeOptions,
  Subscription,
} from '../../src/broker/broker.js';
import type { InstrumentedRole, WatchedWorker } from '../../src/cli/instrument.js';
import { tenantHeader } from '../../src/topology.js';
import { actorEnv, HistoryWriter, historyDirEnv } from './history.js';

/** This process's history file: opened by the first hook called, with the role it names. */
let writer: HistoryWriter | undefined;

function writerFor(role: InstrumentedRole): HistoryWriter | undefined {
  if (writer) return writer;
  const dir = process.env[historyDirEnv];
  if (!dir) return undefined;
  writer = new HistoryWriter(dir, process.env[actorEnv] ?? role);
  writer.record({ kind: 'actor_start', role });
  return writer;
}

/** The instrument hook: the broker to use instead of `broker`, the same one, recorded. */
export function wrapBroker(broker: Broker, role: InstrumentedRole): Broker {
  const history = writerFor(role);
  return history ? new RecordingBroker(broker, history, role) : broker;
}

/** The instrument hook: records a worker's events from now on. */
export function watchWorker(worker: WatchedWorker): void {
  const history = writerFor('worker');
  if (!history) return;
  history.record({ kind: 'actor_start', role: 'worker', worker: worker.id });
  worker.onEvent((ev) => history.record({ kind: 'worker_event', worker: worker.id, ev }));
}

class RecordingBroker implements Broker {
  constructor(
    private readonly inner: Broker,
    private readonly writer: HistoryWriter,
    private readonly role: InstrumentedRole,
  ) {
    inner.onEvent((event) => this.writer.record(describeBrokerEvent(event)));
  }

  declareQueue(name: string): Promise<void> {
    return this.inner.declareQueue(name);
  }

  declareTopicExchange(name: string): Promise<void> {
    return this.inner.declareTopicExchange(name);
  }

  bindQueue(queue: string, exchange: string, pattern: string): Promise<void> {
    return this.inner.bindQueue(queue, exchange, pattern);
  }

  deleteQueue(name: string): Promise<void> {
    return this.inner.deleteQueue(name);
  }

  deleteExchange(name: string): Promise<void> {
    return this.inner.deleteExchange(name);
  }

  async sendToQueue(queue: string, body: Buffer, options?: PublishOptions): Promise<void> {
    await this.recordPublish(queue, undefined, body, options, () => this.inner.sendToQueue(queue, body, options));
  }

  async publish(exchange: string, routingKey: string, body: Buffer, options?: PublishOptions): Promise<void> {
    await this.recordPublish(exchange, routingKey, body, options, () => this.inner.publish(exchange, routingKey, body, options));
  }

  consume(queue: string, handler: DeliveryHandler, options: ConsumeOptions): Promise<Subscription> {
    return this.inner.consume(
      queue,
      (delivery) => {
        this.writer.record({ kind: 'delivery', queue, messageId: delivery.messageId ?? null, redelivered: delivery.redelivered });
        return handler(delivery);
      },
      options,
    );
  }

  request(queue: string, body: Buffer, options: RequestOptions): Promise<Buffer> {
    return this.inner.request(queue, body, options);
  }

  serve(queue: string, handler: RequestHandler, options?: ServeOptions): Promise<Subscription> {
    return this.inner.serve(
      queue,
      async (request) => {
        const receivedAt = Date.now();
        const answer = await handler(request);
        this.recordControl(request.body, answer, receivedAt);
        return answer;
      },
      options,
    );
  }

  onEvent(listener: (event: BrokerEvent) => void): () => void {
    return this.inner.onEvent(listener);
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  private async recordPublish(
    to: string,
    routingKey: string | undefined,
    body: Buffer,
    options: PublishOptions | undefined,
    send: () => Promise<void>,
  ): Promise<void> {
    if (this.role !== 'orchestrator') return send();
    const base = {
      kind: 'publish' as const,
      to,
      ...(routingKey === undefined ? {} : { routingKey }),
      messageId: options?.messageId ?? null,
      tenantHeader: typeof options?.headers?.[tenantHeader] === 'string' ? options.headers[tenantHeader] : null,
      body: parseJson(body),
    };
    try {
      await send();
      this.writer.record({ ...base, ok: true });
    } catch (error) {
      this.writer.record({ ...base, ok: false, error: error instanceof Error ? `${error.name}: ${error.message}` : String(error) });
      throw error;
    }
  }

  private recordControl(requestBody: Buffer, answerBody: Buffer, receivedAt: number): void {
    const req = parseJson(requestBody);
    const ans = parseJson(answerBody);
    if (isRecord(req) && isRecord(ans) && req.op === 'batch' && ans.op === 'batch' && Array.isArray(req.requests) && Array.isArray(ans.answers)) {
      const answers = ans.answers as unknown[];
      (req.requests as unknown[]).forEach((request, i) => this.recordOne(request, answers[i], receivedAt));
      return;
    }
    this.recordOne(req, ans, receivedAt);
  }

  private recordOne(req: unknown, ans: unknown, receivedAt: number): void {
    if (!isRecord(req) || !isRecord(ans)) return;
    const { jobTypes: _jobTypes, capabilities: _capabilities, ...request } = req;
    const { input: _input, requires: _requires, ...answer } = ans;
    this.writer.record({ kind: 'control', op: typeof req.op === 'string' ? req.op : 'unknown', req: request, ans: answer, receivedAt });
  }
}

function describeBrokerEvent(event: BrokerEvent): { kind: 'broker_event'; type: string; queue?: string; reason?: string } {
  switch (event.type) {
    case 'connection_lost':
      return { kind: 'broker_event', type: event.type, reason: event.error.message };
    case 'consumer_interrupted':
      return { kind: 'broker_event', type: event.type, queue: event.queue, reason: event.reason };
    case 'handler_failed':
      return { kind: 'broker_event', type: event.type, queue: event.queue, reason: String(event.error) };
    case 'redeclare_refused':
      return { kind: 'broker_event', type: event.type, reason: `${event.what}: ${event.error.message}` };
    case 'connection_restored':
      return { kind: 'broker_event', type: event.type };
  }
}

function parseJson(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString('utf8')) as unknown;
  } catch {
    return body.toString('utf8').slice(0, 200);
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
