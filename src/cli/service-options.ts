import { InvalidArgumentError, Option, type Command } from 'commander';
import { formatDuration } from '../core/duration.js';
import { defaultRetainMs } from '../orchestrator/retention.js';
import { defaultRateLimit, formatRateLimit } from '../api/rate-limit.js';
import { defaultLedgerConfig } from '../ledger/ledger.js';
import { loadTenantMap, submitTenantSources, TenantMapError, type SubmitTenantSource } from '../orchestrator/submit-tenant.js';
import { durationFlag, durationOption, positiveIntOption, rateLimitOption, UsageError } from './options.js';

/** Where `planrun orchestrator` and `planrun up` serve the HTTP API and the metrics. */
export function addListenOptions(command: Command): Command {
  return command
    .option('--host <host>', 'where the HTTP API listens', '127.0.0.1')
    .option('--port <n>', 'the HTTP API port', positiveIntOption, 7700)
    .option('--metrics-port <n>', 'serve GET /metrics on this port, without a key (instead of on the API port, with one)', positiveIntOption)
    .option('--metrics-host <host>', 'where the --metrics-port listener listens', '127.0.0.1')
    .option(
      '--metrics-tenant-label',
      'label the queued and running job gauges with tenant too (off: every tenant multiplies those series, and any key that reads /metrics on the API port sees tenant names)',
    )
    .addOption(
      new Option('--rate-limit <rate>', 'submissions (POST /v1/jobs, /v1/jobs/batch, /v1/uploads) per API key, e.g. 100/s, 600/min; off for none')
        .argParser(rateLimitOption)
        .default(defaultRateLimit, formatRateLimit(defaultRateLimit)),
    );
}

export interface RetentionFlags {
  retain: number | 'off';
}

/** A duration above 0, or off; `examples` show the usual scale in the error. */
function durationOrOff(examples: string): (value: string) => number | 'off' {
  return (value) => {
    if (value === 'off') return 'off';
    const ms = durationOption(value);
    if (ms <= 0) throw new InvalidArgumentError(`expected a duration above 0 (e.g. ${examples}), or off`);
    return ms;
  };
}

const retainOption = durationOrOff('14d, 36h');

export interface GrantWindowFlags {
  grantWindow: number | 'off';
}

/** The ledger's abandoned-grant window the flag asks for (null: off). */
export function grantWindowMsFrom(flags: GrantWindowFlags): { grantWindowMs: number | null } {
  return { grantWindowMs: flags.grantWindow === 'off' ? null : flags.grantWindow };
}

/** How long ended jobs are kept, the same on `planrun orchestrator` and `planrun up`. */
export function addRetentionOptions(command: Command): Command {
  return command.addOption(
    new Option(
      '--retain <duration>',
      'delete ended jobs (their attempts and folder-store or S3 outputs; never before their result message went out) this long after they ended; off keeps them',
    )
      .argParser(retainOption)
      .default(defaultRetainMs, formatDuration(defaultRetainMs)),
  );
}

/** The retention pass the flags ask for, if any. */
export function retainMsFrom(flags: RetentionFlags): { retainMs?: number } {
  return flags.retain === 'off' ? {} : { retainMs: flags.retain };
}

/** The ledger's timing, the same on `planrun orchestrator` and `planrun up`. */
export function addLedgerTimingOptions(command: Command): Command {
  return command
    .addOption(durationFlag('--lease-ttl <duration>', 'how long a lease lasts without a heartbeat', defaultLedgerConfig.leaseTtlMs))
    .option('--max-attempts <n>', 'attempts per job unless its submission says otherwise', positiveIntOption, defaultLedgerConfig.defaultMaxAttempts)
    .addOption(durationFlag('--backoff <duration>', 'wait before attempt 2; doubles for each later attempt', defaultLedgerConfig.backoffBaseMs))
    .addOption(durationFlag('--sweep-interval <duration>', 'how often expired leases and lost messages are swept, and waiting work dispatched', 1_000))
    .addOption(
      new Option(
        '--dispatch <mode>',
        "fair: the orchestrator releases a job's work when a worker of its type has a free slot, in fair shares between tenants and within the limits (planrun tenants); fifo: at submit, in submission order",
      )
        .choices(['fair', 'fifo'])
        .default(defaultLedgerConfig.dispatch),
    )
    .addOption(
      new Option(
        '--grant-window <duration>',
        'a lease granted but never renewed this long goes back to queued at the same attempt, without spending it (its worker stopped waiting); off: it runs out with the lease TTL',
      )
        .argParser(durationOrOff('15s, 5s'))
        .default(
          defaultLedgerConfig.grantWindowMs ?? 'off',
          defaultLedgerConfig.grantWindowMs === null ? 'off' : formatDuration(defaultLedgerConfig.grantWindowMs),
        ),
    );
}

export interface SubmitTenantFlags {
  submitTenantFrom: SubmitTenantSource['from'];
  tenantMap?: string;
}

/** Where queue submissions take their tenant from, the same on `planrun orchestrator` and `planrun up`. */
export function addSubmitTenantOptions(command: Command): Command {
  return command
    .addOption(
      new Option('--submit-tenant-from <source>', "a queue submission's tenant: its body's, or its broker user's (the user_id property RabbitMQ checks)")
        .choices(submitTenantSources)
        .default('body'),
    )
    .option('--tenant-map <file>', 'with --submit-tenant-from user-id: a JSON object from broker user to tenant (default: the user name is the tenant)');
}

/** The tenant source the flags ask for; `user-id` needs RabbitMQ, the broker that knows who published. */
export function submitTenantFrom(flags: SubmitTenantFlags, onRabbitMq: boolean): SubmitTenantSource {
  if (flags.submitTenantFrom === 'body') {
    if (flags.tenantMap !== undefined) throw new UsageError('--tenant-map applies with --submit-tenant-from user-id');
    return { from: 'body' };
  }
  if (!onRabbitMq) {
    throw new UsageError(
      '--submit-tenant-from user-id needs RabbitMQ (--amqp-file, PLANRUN_AMQP_URL or --amqp): the embedded broker has no users to vouch for a submission',
    );
  }
  if (flags.tenantMap === undefined) return { from: 'user-id' };
  try {
    return { from: 'user-id', tenantMap: loadTenantMap(flags.tenantMap) };
  } catch (error) {
    if (error instanceof TenantMapError) throw new UsageError(error.message);
    throw error;
  }
}
