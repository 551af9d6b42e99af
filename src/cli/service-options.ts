import { defaultLedgerConfig } from '../ledger/ledger.js';
import { Option, type Command } from 'commander';
import { defaultRateLimit, formatRateLimit } from '../api/rate-limit.js';
import { durationFlag, positiveIntOption, rateLimitOption } from './options.js';

/** Where `planrun orchestrator` and `planrun up` serve the HTTP API and the metrics. */
export function addListenOptions(command: Command): Command {
  return command
    .option('--host <host>', 'where the HTTP API listens', '127.0.0.1')
    .option('--port <n>', 'the HTTP API port', positiveIntOption, 7700)
    .option('--metrics-port <n>', 'serve GET /metrics on this port, without a key (instead of on the API port, with one)', positiveIntOption)
    .option('--metrics-host <host>', 'where the --metrics-port listener listens', '127.0.0.1')
    .addOption(
      new Option('--rate-limit <rate>', 'submissions (POST /v1/jobs, /v1/jobs/batch, /v1/uploads) per API key, e.g. 100/s, 600/min; off for none')
        .argParser(rateLimitOption)
        .default(defaultRateLimit, formatRateLimit(defaultRateLimit)),
    );
}

/** The ledger's timing, the same on `planrun orchestrator` and `planrun up`. */
export function addLedgerTimingOptions(command: Command): Command {
  return command
    .addOption(durationFlag('--lease-ttl <duration>', 'how long a lease lasts without a heartbeat', defaultLedgerConfig.leaseTtlMs))
    .option('--max-attempts <n>', 'attempts per job unless its submission says otherwise', positiveIntOption, defaultLedgerConfig.defaultMaxAttempts)
    .addOption(durationFlag('--backoff <duration>', 'wait before attempt 2; doubles for each later attempt', defaultLedgerConfig.backoffBaseMs))
    .addOption(durationFlag('--sweep-interval <duration>', 'how often expired leases and lost messages are swept', 1_000));
}
