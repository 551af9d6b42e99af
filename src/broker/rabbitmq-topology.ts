import type { Channel, ChannelModel, Options } from 'amqplib';

/**
 * How planrun's queues are kept. classic: on one node (the default, and what queues
 * declared before this option were). quorum: replicated over a RabbitMQ cluster (Raft);
 * a message the broker confirmed survives the loss of a minority of the nodes. planrun
 * uses nothing a quorum queue lacks (no priorities, no exclusive or auto-delete queues:
 * replies travel by direct reply-to; per-message TTL works on quorum queues since 3.10).
 */
export type QueueType = 'classic' | 'quorum';
export const queueTypes: readonly QueueType[] = ['classic', 'quorum'];

/** AMQP's reply code for a declaration that does not match what exists. */
const preconditionFailed = 406;

/**
 * Declares one of planrun's queues with the type asked for. A queue that exists with
 * another type is refused by the broker (406 PRECONDITION_FAILED, inequivalent arg
 * x-queue-type); that refusal comes back saying which queue, its type and what to do.
 */
export async function declareQueue(channel: Channel, name: string, type: QueueType): Promise<void> {
  try {
    await channel.assertQueue(name, queueOptions(type));
  } catch (error) {
    throw typeMismatch(error, name, type) ?? error;
  }
}

function queueOptions(type: QueueType): Options.AssertQueue {
  // Classic queues are declared without the argument, as before the option existed, so
  // that their declaration stays equivalent to the queues already on the broker.
  return type === 'quorum' ? { durable: true, arguments: { 'x-queue-type': 'quorum' } } : { durable: true };
}

/** The broker's refusal of another queue type, reworded; undefined for any other error. */
function typeMismatch(error: unknown, name: string, wanted: QueueType): Error | undefined {
  if (!(error instanceof Error) || (error as { code?: unknown }).code !== preconditionFailed) return undefined;
  if (!/inequivalent arg 'x-queue-type'/.test(error.message)) return undefined;
  const current = /current is the value '([^']+)'/.exec(error.message)?.[1] ?? 'classic';
  const mismatch = new Error(
    `queue ${name} exists as a ${current} queue, but this process declares it ${wanted} (--queue-type ${wanted}): ` +
      `start every planrun process on this broker with --queue-type ${current}, or, to change its type, stop planrun, ` +
      `let the queue drain and delete it (rabbitmqctl delete_queue ${name}) so that it is declared again as ${wanted}`,
    { cause: error },
  );
  // Still a broker refusal (it closed the channel): callers tell refusals by their reply code.
  return Object.assign(mismatch, { code: preconditionFailed });
}

interface Binding {
  queue: string;
  exchange: string;
  pattern: string;
}

type Declaration = { what: string; run: (channel: Channel) => Promise<unknown> };

/**
 * What this client has declared, to declare again after a reconnect: the broker may have
 * restarted without them (or been replaced), and consumers need their queues back.
 */
export class DeclaredTopology {
  constructor(private readonly queueType: QueueType) {}

  private readonly queues = new Set<string>();
  private readonly exchanges = new Set<string>();
  private readonly bindings = new Map<string, Binding>();

  addQueue(name: string): void {
    this.queues.add(name);
  }

  addExchange(name: string): void {
    this.exchanges.add(name);
  }

  addBinding(binding: Binding): void {
    this.bindings.set(bindingKey(binding), binding);
  }

  removeQueue(name: string): void {
    this.queues.delete(name);
    for (const [key, binding] of this.bindings) if (binding.queue === name) this.bindings.delete(key);
  }

  removeExchange(name: string): void {
    this.exchanges.delete(name);
    for (const [key, binding] of this.bindings) if (binding.exchange === name) this.bindings.delete(key);
  }

  /**
   * Declares everything again. A declaration the broker refuses (say, a binding to an
   * exchange someone else deleted) is reported and skipped rather than failing the whole
   * connection: one stale binding must not keep every message from moving. Losing the
   * connection midway throws.
   */
  async redeclare(connection: ChannelModel, onRefused: (what: string, error: Error) => void): Promise<void> {
    let channel: Channel | undefined;
    for (const declaration of this.declarations()) {
      channel ??= await openChannel(connection);
      try {
        await declaration.run(channel);
      } catch (error) {
        if (!isRefusal(error)) throw error;
        onRefused(declaration.what, error);
        channel = undefined; // a refusal closes the channel
      }
    }
    await channel?.close();
  }

  private *declarations(): Generator<Declaration> {
    for (const exchange of this.exchanges) {
      yield { what: `exchange ${exchange}`, run: (channel) => channel.assertExchange(exchange, 'topic', { durable: true }) };
    }
    for (const queue of this.queues) {
      yield { what: `queue ${queue}`, run: (channel) => declareQueue(channel, queue, this.queueType) };
    }
    for (const { queue, exchange, pattern } of this.bindings.values()) {
      yield {
        what: `binding of ${queue} to ${exchange} (${pattern})`,
        run: (channel) => channel.bindQueue(queue, exchange, pattern),
      };
    }
  }
}

async function openChannel(connection: ChannelModel): Promise<Channel> {
  const channel = await connection.createChannel();
  channel.on('error', () => undefined); // a refusal also rejects the declaration, handled there
  return channel;
}

/** amqplib errors carry the broker's numeric reply code when it refused an operation. */
function isRefusal(error: unknown): error is Error {
  return error instanceof Error && typeof (error as { code?: unknown }).code === 'number';
}

function bindingKey({ queue, exchange, pattern }: Binding): string {
  return JSON.stringify([queue, exchange, pattern]);
}
