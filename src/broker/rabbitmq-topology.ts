import type { Channel, ChannelModel } from 'amqplib';

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
      yield { what: `queue ${queue}`, run: (channel) => channel.assertQueue(queue, { durable: true }) };
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
