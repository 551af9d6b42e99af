/**
 * A `planrun up` stand-in for `embedded-store.test.ts`: run as
 * `node embedded-store-fixture-child.js STORE QUEUE`, it opens an embedded broker on the
 * store and publishes to QUEUE without pause, many publishes in flight at once, printing
 * each message id once its publish is confirmed, until it is killed.
 */
import { EmbeddedBroker } from '../../src/broker/embedded.js';
import { EmbeddedBrokerStore } from '../../src/broker/embedded-store.js';

const [storePath, queue] = process.argv.slice(2);
if (!storePath || !queue) {
  process.stderr.write('usage: embedded-store-fixture-child.js STORE QUEUE\n');
  process.exit(2);
}

const broker = new EmbeddedBroker({ store: EmbeddedBrokerStore.open(storePath) }).connect();
await broker.declareQueue(queue);
let next = 0;
for (;;) {
  const batch = Array.from({ length: 20 }, () => `m-${next++}`);
  await Promise.all(
    batch.map(async (id) => {
      await broker.sendToQueue(queue, Buffer.from(`body of ${id}`), { messageId: id, headers: { n: id } });
      process.stdout.write(`${id}\n`);
    }),
  );
}
