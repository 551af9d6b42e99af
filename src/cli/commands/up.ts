import type { RateLimit } from '../../api/rate-limit.js';
import type { Command } from 'commander';
import type { DispatchMode } from '../../ledger/ledger.js';
import { addStoreOptions, type StoreFlags } from '../store-options.js';
import { addAmqpOptions, type AmqpFlags } from '../amqp-url.js';
import { collect, durationFlag, listOption, positiveIntOption } from '../options.js';
import {
  addLedgerTimingOptions,
  addListenOptions,
  addRetentionOptions,
  addSubmitTenantOptions,
  type GrantWindowFlags,
  type RetentionFlags,
  type SubmitTenantFlags,
} from '../service-options.js';
import { addSandboxOptions, type SandboxFlags } from '../sandbox-options.js';

export interface UpFlags extends StoreFlags, AmqpFlags, SubmitTenantFlags, SandboxFlags, RetentionFlags, GrantWindowFlags {
  ledger?: string;
  dataDir: string;
  host: string;
  port: number;
  metricsHost: string;
  metricsPort?: number;
  metricsTenantLabel?: boolean;
  rateLimit: RateLimit | 'off';
  workers: number;
  slots: number;
  jobs?: string[];
  capabilities?: string[];
  leaseTtl: number;
  heartbeatInterval: number;
  maxAttempts: number;
  backoff: number;
  sweepInterval: number;
  dispatch: DispatchMode;
  stopGrace: number;
  prefix: string;
}

export function registerUpCommand(program: Command): void {
  const command = addStoreOptions(
    addSandboxOptions(
      addLedgerTimingOptions(
        addListenOptions(
          addAmqpOptions(
            program.command('up').description('run planrun on this machine: the orchestrator with its HTTP API, and supervised local workers'),
            'RabbitMQ URL, without a password (or PLANRUN_AMQP_URL); without any, an embedded broker',
          )
            .option('--ledger <sqlite|url>', 'the ledger: sqlite (in the data dir) or a postgres:// URL (or PLANRUN_LEDGER)')
            .option('--data-dir <dir>', 'where the ledger, the API keys and the outputs live', './.planrun'),
        ),
      ),
    )
      .option('--workers <n>', 'local worker processes', positiveIntOption, 2)
      .option('--slots <n>', 'jobs each worker runs at once', positiveIntOption, 2)
      .option('--jobs <module>', 'a job-types module the workers load as well as the built-in types (repeatable)', collect)
      .option('--capabilities <list>', 'comma-separated capabilities of the local workers (ffmpeg is detected)', listOption)
      .addOption(durationFlag('--heartbeat-interval <duration>', 'how often workers renew their leases', 30_000))
      .addOption(
        durationFlag(
          '--stop-grace <duration>',
          'on Ctrl-C, how long running jobs may take to finish before they are handed back (a second Ctrl-C: at once)',
          30_000,
        ),
      )
      .option('--prefix <name>', 'prefix of every queue and exchange name', 'planrun'),
  );
  addSubmitTenantOptions(addRetentionOptions(command)).action(async (flags: UpFlags) => (await import('./up-action.js')).runUp(flags));
}
