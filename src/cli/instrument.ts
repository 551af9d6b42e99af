/**
 * The instrument hook: when PLANRUN_INSTRUMENT names a module (a file path or a `file:`
 * URL), `planrun orchestrator` and `planrun worker` import it before they start and let it
 * observe the process. The chaos runner records its history this way; planrun itself
 * ships no instrument and imports none unless asked.
 *
 * The module exports either or both of:
 *
 * - `wrapBroker(broker, role)`: returns the broker connection the process uses instead of
 *   `broker` (the same one, observed); called once, right after the connection is made;
 * - `watchWorker(worker)`: called once with the worker (`planrun worker` only), before it
 *   starts; it may subscribe to the worker's events.
 *
 * An instrument observes: it must not change what the process does.
 */
import { isAbsolute, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Broker } from '../broker/broker.js';
import type { WorkerEvent } from '../worker/worker-events.js';

export const instrumentEnv = 'PLANRUN_INSTRUMENT';

export type InstrumentedRole = 'orchestrator' | 'worker';

/** What an instrument sees of a worker. */
export interface WatchedWorker {
  readonly id: string;
  onEvent(listener: (event: WorkerEvent) => void): () => void;
}

/** The exports of an instrument module. */
export interface Instrument {
  wrapBroker?(broker: Broker, role: InstrumentedRole): Broker;
  watchWorker?(worker: WatchedWorker): void;
}

/** The instrument PLANRUN_INSTRUMENT names, or undefined when it names none. */
export async function loadInstrument(env: NodeJS.ProcessEnv = process.env): Promise<Instrument | undefined> {
  const spec = env[instrumentEnv];
  if (!spec) return undefined;
  const url = /^[a-z][a-z0-9+.-]*:/i.test(spec) && !isAbsolute(spec) ? spec : pathToFileURL(resolve(spec)).href;
  let exports: Record<string, unknown>;
  try {
    exports = (await import(url)) as Record<string, unknown>;
  } catch (error) {
    throw new Error(`cannot load the ${instrumentEnv} module ${spec}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
  const { wrapBroker, watchWorker } = exports;
  const problems = [
    ...(wrapBroker !== undefined && typeof wrapBroker !== 'function' ? ['wrapBroker is not a function'] : []),
    ...(watchWorker !== undefined && typeof watchWorker !== 'function' ? ['watchWorker is not a function'] : []),
    ...(wrapBroker === undefined && watchWorker === undefined ? ['it exports neither wrapBroker nor watchWorker'] : []),
  ];
  if (problems.length > 0) throw new TypeError(`the ${instrumentEnv} module ${spec} is no instrument: ${problems.join('; ')}`);
  return exports;
}
