import type { RateLimit } from '../../api/rate-limit.js';
import type { Command } from 'commander';
import type { DispatchMode } from '../../ledger/ledger.js';
import { addStoreOptions, type StoreFlags } from '../store-options.js';
import { defaultLedgerConfig } from '../../ledger/ledger.js';
import { addAmqpOptions, type AmqpFlags } from '../amqp-url.js';
import { durationFlag } from '../options.js';
import {
  addLedgerTimingOptions,
  addListenOptions,
  addRetentionOptions,
  addSubmitTenantOptions,
  type GrantWindowFlags,
  type RetentionFlags,
  type SubmitTenantFlags,
} from '../service-options.js';

export interface OrchestratorFlags extends StoreFlags, AmqpFlags, SubmitTenantFlags, RetentionFlags, GrantWindowFlags {
  brokerSocket?: string;
  consumerTimeout?: number;
  ledger?: string;
  dataDir: string;
  leaseTtl: number;
  maxAttempts: number;
  backoff: number;
  sweepInterval: number;
  dispatch: DispatchMode;
  redispatchAfter: number;
  prefix: string;
  host: string;
  port: number;
  metricsHost: string;
  metricsPort?: number;
  metricsTenantLabel?: boolean;
  rateLimit: RateLimit | 'off';
}

export function registerOrchestratorCommand(program: Command): void {
  const command = addStoreOptions(
    addLedgerTimingOptions(
      addListenOptions(
        addAmqpOptions(
          program.command('orchestrator').description('run the orchestrator: the ledger, the control plane, the outbox relay, the sweeper and the HTTP API'),
        )
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
          .option('--data-dir <dir>', 'where the SQLite ledger and the API keys live', './.planrun'),
      ),
    )
      .addOption(
        durationFlag(
          '--redispatch-after <duration>',
          'a queued job whose work message went unleased this long, while a worker of its type had a free slot, gets it again',
          defaultLedgerConfig.redispatchAfterMs,
        ),
      )
      .option('--prefix <name>', 'prefix of every queue and exchange name', 'planrun'),
  );
  addSubmitTenantOptions(addRetentionOptions(command)).action(async (flags: OrchestratorFlags) =>
    (await import('./orchestrator-action.js')).runOrchestrator(flags),
  );
}
