/** Small helpers for broker tests: waiting for something to happen, or for a while to pass. */
import { randomUUID } from 'node:crypto';
import type { Delivery, DeliveryHandler } from '../../src/broker/broker.js';

/** How long tests wait to be fairly sure that something does NOT happen. */
export const quietMs = 250;

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls `check` until it holds, failing with `what` (worded when it fails) after `timeoutMs`. */
export async function eventually(what: string | (() => string), check: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${typeof what === 'string' ? what : what()}`);
    }
    await sleep(10);
  }
}

export function uniqueName(prefix: string): string {
  return `planrun-test.${prefix}.${randomUUID().slice(0, 8)}`;
}

/** Collects what a consumer receives; `autoAck` settles each delivery at once. */
export class Inbox {
  readonly deliveries: Delivery[] = [];

  constructor(private readonly autoAck: boolean) {}

  readonly handler: DeliveryHandler = (delivery) => {
    this.deliveries.push(delivery);
    if (this.autoAck) delivery.ack();
  };

  get bodies(): string[] {
    return this.deliveries.map((delivery) => delivery.body.toString());
  }

  async waitFor(count: number, timeoutMs?: number): Promise<Delivery[]> {
    await eventually(
      () => `${count} deliveries (got ${this.deliveries.length})`,
      () => this.deliveries.length >= count,
      timeoutMs,
    );
    return this.deliveries;
  }
}
