import type { Logger } from 'pino';
import { z } from 'zod';
import type { Broker, Delivery, Subscription } from '../broker/broker.js';
import { LedgerError } from '../ledger/errors.js';
import type { SubmitParams, SubmitResult } from '../ledger/ledger.js';
import type { Topology } from '../topology.js';

/** A submission on the submit queue: the HTTP body plus the tenant; message id = idempotency key. */
const queuedSubmission = z.object({
  tenant: z.string().min(1),
  type: z.string().min(1),
  input: z.unknown(),
  requires: z.array(z.string().min(1)).optional(),
  maxAttempts: z.number().int().min(1).optional(),
});

/** Header on a dead-lettered submission saying why it was refused. */
export const deadReasonHeader = 'planrun-dead-reason';

/**
 * Takes submissions from the submit queue. A message is acked only after the ledger
 * committed its job; one that can never become a job (not JSON, wrong shape, no message
 * id to deduplicate on) goes to the dead queue with the reason, and only then is acked,
 * so nothing is lost and consuming goes on. A ledger failure gives the message back.
 */
export class SubmitConsumer {
  private subscription: Subscription | undefined;

  constructor(
    private readonly broker: Broker,
    private readonly topology: Topology,
    private readonly submit: (params: SubmitParams) => Promise<SubmitResult>,
    private readonly logger: Logger,
    private readonly retryDelayMs = 1000,
  ) {}

  async start(prefetch = 32): Promise<void> {
    await this.broker.declareQueue(this.topology.submitQueue);
    await this.broker.declareQueue(this.topology.deadQueue);
    this.subscription = await this.broker.consume(this.topology.submitQueue, (delivery) => this.onDelivery(delivery), { prefetch });
  }

  async stop(): Promise<void> {
    await this.subscription?.cancel();
  }

  private async onDelivery(delivery: Delivery): Promise<void> {
    const parsed = parse(delivery);
    if (typeof parsed === 'string') {
      await this.deadLetter(delivery, parsed);
      return;
    }
    try {
      const { job, created } = await this.submit(parsed);
      this.logger.debug({ jobId: job.id, created, idempotencyKey: parsed.idempotencyKey }, 'submission from the queue');
      delivery.ack();
    } catch (error) {
      if (error instanceof LedgerError && error.code === 'invalid_input') {
        await this.deadLetter(delivery, error.message);
        return;
      }
      this.logger.warn({ err: error }, 'submission not recorded; it goes back to the queue');
      setTimeout(() => delivery.nack({ requeue: true }), this.retryDelayMs);
    }
  }

  private async deadLetter(delivery: Delivery, reason: string): Promise<void> {
    try {
      await this.broker.sendToQueue(this.topology.deadQueue, delivery.body, {
        ...(delivery.messageId === undefined ? {} : { messageId: delivery.messageId }),
        headers: { [deadReasonHeader]: reason },
      });
      this.logger.warn({ messageId: delivery.messageId, reason }, 'submission dead-lettered');
      delivery.ack();
    } catch (error) {
      this.logger.error({ err: error }, 'could not dead-letter a submission; it goes back to the queue');
      setTimeout(() => delivery.nack({ requeue: true }), this.retryDelayMs);
    }
  }
}

function parse(delivery: Delivery): SubmitParams | string {
  if (!delivery.messageId) return 'the message id must be set: it is the idempotency key that makes redelivery safe';
  let body: unknown;
  try {
    body = JSON.parse(delivery.body.toString('utf8'));
  } catch {
    return 'the body is not JSON';
  }
  const result = queuedSubmission.safeParse(body);
  if (!result.success) {
    return result.error.issues.map((issue) => `${issue.path.join('.') || 'body'}: ${issue.message}`).join('; ');
  }
  const { tenant, type, input, requires, maxAttempts } = result.data;
  return {
    tenant,
    type,
    input,
    idempotencyKey: delivery.messageId,
    ...(requires === undefined ? {} : { requires }),
    ...(maxAttempts === undefined ? {} : { maxAttempts }),
  };
}
