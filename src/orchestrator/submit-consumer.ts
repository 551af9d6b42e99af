import type { Logger } from 'pino';
import type { Broker, Delivery, Subscription } from '../broker/broker.js';
import { LedgerError } from '../ledger/errors.js';
import type { SubmitParams, SubmitResult } from '../ledger/ledger.js';
import { dispatchParams } from '../submission/dispatch-fields.js';
import { readQueuedSubmission } from '../submission/queued.js';
import type { Topology } from '../topology.js';
import { tenantOfUser, type SubmitTenantSource } from './submit-tenant.js';

/** Header on a dead-lettered submission saying why it was refused. */
export const deadReasonHeader = 'planrun-dead-reason';

/**
 * Takes submissions from the submit queue. A message is acked only after the ledger
 * committed its job; one that can never become a job (no message id to deduplicate on, or
 * a body the HTTP API would refuse too: src/submission/rules.ts) goes to the dead queue
 * with the reason, the words HTTP would answer with, and only then is acked (so does one
 * whose tenant is not its publisher's, when the tenant comes from the broker user),
 * so nothing is lost and consuming goes on. A ledger failure gives the message back.
 */
export class SubmitConsumer {
  private subscription: Subscription | undefined;

  constructor(
    private readonly broker: Broker,
    private readonly topology: Topology,
    private readonly submit: (params: SubmitParams) => Promise<SubmitResult>,
    private readonly logger: Logger,
    private readonly tenantSource: SubmitTenantSource = { from: 'body' },
    private readonly retryDelayMs = 1000,
  ) {}

  async start(prefetch = 32): Promise<void> {
    await this.topology.declareSubmission(this.broker);
    this.subscription = await this.broker.consume(this.topology.submitQueue, (delivery) => this.onDelivery(delivery), { prefetch });
  }

  async stop(): Promise<void> {
    await this.subscription?.cancel();
  }

  private async onDelivery(delivery: Delivery): Promise<void> {
    const parsed = parse(delivery, this.tenantSource);
    if (typeof parsed === 'string') {
      await this.deadLetter(delivery, parsed);
      return;
    }
    try {
      const { job, created } = await this.submit(parsed);
      this.logger.debug({ jobId: job.id, created, idempotencyKey: parsed.idempotencyKey }, 'submission from the queue');
      delivery.ack();
    } catch (error) {
      // A body that breaks the rules, or reuses a message id (its idempotency key) for another submission.
      if (error instanceof LedgerError && (error.code === 'invalid_input' || error.code === 'idempotency_conflict')) {
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

/**
 * A submission on the submit queue: the HTTP body plus the tenant; message id =
 * idempotency key. With the tenant taken from the broker user, the body's must be that one.
 */
function parse(delivery: Delivery, tenantSource: SubmitTenantSource): SubmitParams | string {
  const owner = tenantSource.from === 'user-id' ? tenantOfUser(tenantSource, delivery.userId) : undefined;
  if (owner && 'problem' in owner) return owner.problem;
  if (!delivery.messageId) return 'the message id must be set: it is the idempotency key that makes redelivery safe';
  const submission = readQueuedSubmission(delivery.body);
  if (typeof submission === 'string') return submission;
  const { tenant, type, input, requires, maxAttempts, timeoutSeconds, limits } = submission;
  if (owner && owner.tenant !== tenant) {
    return `the body claims tenant ${JSON.stringify(tenant)}, but the broker user ${JSON.stringify(delivery.userId)} submits for tenant ${JSON.stringify(owner.tenant)}`;
  }
  let dispatch: ReturnType<typeof dispatchParams>;
  try {
    dispatch = dispatchParams(submission, 'body');
  } catch (error) {
    return (error as Error).message;
  }
  return {
    tenant,
    type,
    input,
    idempotencyKey: delivery.messageId,
    ...(requires === undefined ? {} : { requires }),
    ...(maxAttempts === undefined ? {} : { maxAttempts }),
    ...(timeoutSeconds === undefined ? {} : { timeoutSeconds }),
    ...(limits === undefined ? {} : { limits }),
    ...dispatch,
  };
}
