/**
 * What an outsider on the broker can do to the control plane: publish a request to the
 * control queue with a reply-to (RabbitMQ's direct reply-to, or the embedded broker's), as
 * any worker would, and read the answer. Tests and the chaos adversary use it to forge
 * lease, heartbeat, settle and complete_upload requests.
 */
import type { Broker } from '../../src/broker/broker.js';
import { decode, encode, fleetKeyHeader, type ControlAnswer } from '../../src/control/protocol.js';
import type { Topology } from '../../src/topology.js';

export async function forgeControlRequest(
  broker: Broker,
  topology: Topology,
  request: Record<string, unknown>,
  options: { fleetKey?: string; timeoutMs?: number } = {},
): Promise<ControlAnswer> {
  const body = await broker.request(topology.controlQueue, encode(request), {
    timeoutMs: options.timeoutMs ?? 5000,
    ...(options.fleetKey ? { headers: { [fleetKeyHeader]: options.fleetKey } } : {}),
  });
  return decode(body) as ControlAnswer;
}
