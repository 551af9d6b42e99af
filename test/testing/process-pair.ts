/**
 * `planrun orchestrator` and one `planrun worker` as an operator runs them, on the local
 * RabbitMQ under a topology prefix of their own, with the SQLite ledger in `dir` or a
 * fresh PostgreSQL schema; a client with a key of tenant `acme`. `stop` kills both and
 * removes every queue, exchange and schema they made.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { RabbitMqBroker } from '../../src/broker/rabbitmq.js';
import { Client } from '../../src/client/client.js';
import { Topology } from '../../src/topology.js';
import { fastTestUrl, freshSchemaName, TestSchemas } from '../ledger/postgres/testing.js';
import { freePort } from './free-port.js';
import { createKey } from './keys.js';
import { rabbitMqUrl } from './services.js';
import { startPlanrunProcess, startWorkerProcess, type WorkerProcess } from './worker-process.js';

export interface ProcessPair {
  topology: Topology;
  client: Client;
  /** Where the orchestrator's API listens, and the key of tenant `acme` (for the CLI). */
  url: string;
  key: string;
  /** The `planrun worker` process. */
  worker: WorkerProcess;
  /** Kills both processes and removes what they made on RabbitMQ and PostgreSQL. */
  stop(): Promise<void>;
}

export async function startProcessPair(options: {
  dir: string;
  ledger: 'sqlite' | 'postgres';
  /** Flags of the worker beyond the broker, prefix, heartbeat and folders (e.g. `--jobs`, `--slots`). */
  workerArgs: string[];
  /** Every job type whose work queue may have been declared, to delete at the end. */
  jobTypes: string[];
}): Promise<ProcessPair> {
  const { dir, ledger } = options;
  const topology = new Topology(`t${randomBytes(4).toString('hex')}`);
  const schemas = new TestSchemas();
  const schema = freshSchemaName();
  const ledgerUrl = ledger === 'postgres' ? `${fastTestUrl()}&schema=${schema}` : undefined;
  const key = await createKey(dir, 'acme', ledgerUrl);
  const port = await freePort();
  const ledgerArgs = ledgerUrl === undefined ? [] : ['--ledger', ledgerUrl];
  const processes: WorkerProcess[] = [];
  processes.push(
    await startPlanrunProcess(
      ['orchestrator', '--amqp', rabbitMqUrl, '--data-dir', dir, '--port', String(port), '--prefix', topology.prefix, '--backoff', '100ms', ...ledgerArgs],
      'orchestrator ready',
    ),
  );
  processes.push(
    await startWorkerProcess([
      '--amqp',
      rabbitMqUrl,
      '--prefix',
      topology.prefix,
      '--heartbeat-interval',
      '300ms',
      '--output-dir',
      join(dir, 'outputs'),
      '--scratch-dir',
      join(dir, 'scratch'),
      ...options.workerArgs,
    ]),
  );
  return {
    topology,
    client: new Client({ url: `http://127.0.0.1:${port}`, key }),
    url: `http://127.0.0.1:${port}`,
    key,
    worker: processes[1]!,
    stop: async () => {
      for (const { child } of processes) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await Promise.all(processes.map((p) => p.exited));
      const broker = await RabbitMqBroker.connect({ url: rabbitMqUrl });
      for (const queue of [topology.controlQueue, topology.submitQueue, topology.deadQueue, ...options.jobTypes.map((type) => topology.workQueue(type))]) {
        await broker.deleteQueue(queue).catch(() => undefined);
      }
      for (const exchange of topology.exchanges) await broker.deleteExchange(exchange).catch(() => undefined);
      await broker.close();
      if (ledger === 'postgres') await schemas.drop(schema);
      await schemas.dropAll();
    },
  };
}
