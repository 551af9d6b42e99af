/**
 * A worker stand-in for `embedded-socket.test.ts`: run as
 * `node embedded-socket-fixture-child.js SOCKET QUEUE`, it consumes QUEUE over the socket
 * and never acks, printing one JSON line per delivery (and `ready` once consuming), until
 * it is killed.
 */
import { SocketBroker } from '../../src/broker/embedded-socket-client.js';

const [path, queue] = process.argv.slice(2);
if (!path || !queue) {
  process.stderr.write('usage: embedded-socket-fixture-child.js SOCKET QUEUE\n');
  process.exit(2);
}

const broker = await SocketBroker.connect({ path });
await broker.consume(
  queue,
  (delivery) => {
    process.stdout.write(`${JSON.stringify({ messageId: delivery.messageId, redelivered: delivery.redelivered })}\n`);
  },
  { prefetch: 1 },
);
process.stdout.write('ready\n');
