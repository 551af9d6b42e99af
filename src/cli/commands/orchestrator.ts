import type { Command } from 'commander';
import { addStoreOptions, type StoreFlags } from '../store-options.js';
import { defaultLedgerConfig } from '../../ledger/ledger.js';
import { durationFlag, positiveIntOption } from '../options.js';

export interface OrchestratorFlags extends StoreFlags {
  amqp?: string;
  brokerSocket?: string;
  consumerTimeout?: number;
  ledger?: string;
  dataDir: string;
  leaseTtl: number;
  maxAttempts: number;
  backoff: number;
  sweepInterval: number;
  redispatchAfter: number;
  prefix: string;
  host: string;
  port: number;
  metricsHost: string;
  metricsPort?: number;
}

export function registerOrchestratorCommand(program: Command): void {
  addStoreOptions(
    program
      .command('orchestrator')
      .description('run the orchestrator: the ledger, the control plane, the outbox relay, the sweeper and the HTTP API')
      .option('--amqp <url>', 'RabbitMQ URL (or PLANRUN_AMQP_URL)')
      .option(
        '--broker-socket <path>',
        'instead of RabbitMQ: run the embedded broker (stored in the data dir) and serve it on this Unix socket, for `planrun worker --broker-socket`',
      )
      .addOption(
        durationFlag(
          '--consumer-timeout <duration>',
          "with --broker-socket: like RabbitMQ's consumer_timeout, a delivery left unacked this long closes its consumer (default: none)",
        ),
      )
      .option('--ledger <sqlite|url>', 'the ledger: sqlite (in the data dir) or a postgres:// URL (or PLANRUN_LEDGER)')
      .option('--data-dir <dir>', 'where the SQLite ledger and the API keys live', './.planrun')
      .option('--host <host>', 'where the HTTP API listens', '127.0.0.1')
      .option('--port <n>', 'the HTTP API port', positiveIntOption, 7700)
      .option('--metrics-port <n>', 'serve GET /metrics on this port, without a key (instead of on the API port, with one)', positiveIntOption)
      .option('--metrics-host <host>', 'where the --metrics-port listener listens', '127.0.0.1')
      .addOption(durationFlag('--lease-ttl <duration>', 'how long a lease lasts without a heartbeat', defaultLedgerConfig.leaseTtlMs))
      .option('--max-attempts <n>', 'attempts per job unless its submission says otherwise', positiveIntOption, defaultLedgerConfig.defaultMaxAttempts)
      .addOption(durationFlag('--backoff <duration>', 'wait before attempt 2; doubles for each later attempt', defaultLedgerConfig.backoffBaseMs))
      .addOption(durationFlag('--sweep-interval <duration>', 'how often expired leases and lost messages are swept', 1_000))
      .addOption(
        durationFlag(
          '--redispatch-after <duration>',
          'a queued job whose work message went unleased this long, while a worker of its type had a free slot, gets it again',
          defaultLedgerConfig.redispatchAfterMs,
        ),
      )
      .option('--prefix <name>', 'prefix of every queue and exchange name', 'planrun'),
  ).action(async (flags: OrchestratorFlags) => (await import('./orchestrator-action.js')).runOrchestrator(flags));
}
