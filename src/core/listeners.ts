/**
 * A set of listeners for one kind of event. A listener that throws cannot break the code
 * that emitted the event (often the inside of a socket or channel callback): its error is
 * rethrown on its own, in a microtask, where it surfaces as what it is.
 */
export class Listeners<T> {
  private readonly listeners = new Set<(event: T) => void>();

  /** Adds a listener; returns the function that removes it. */
  on(listener: (event: T) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  emit(event: T): void {
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch (error) {
        queueMicrotask(() => {
          throw error;
        });
      }
    }
  }
}
