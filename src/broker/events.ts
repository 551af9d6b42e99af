import type { BrokerEvent } from './broker.js';

/** The listeners of one broker's `onEvent`. */
export class BrokerEvents {
  private readonly listeners = new Set<(event: BrokerEvent) => void>();

  on(listener: (event: BrokerEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  emit(event: BrokerEvent): void {
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch (error) {
        // Events are emitted from inside the broker's own machinery (socket and channel
        // callbacks), where a throw would break it; the listener's bug surfaces on its own.
        queueMicrotask(() => {
          throw error;
        });
      }
    }
  }
}
