import { join, relative } from 'node:path';
import { LimitEnforcement } from '../../worker/runner/limit-enforcement.js';
import { createLogger } from '../../core/logger.js';
import { localKeyFile, localTenant } from '../../deploy/local-key.js';
import { LocalStack } from '../../deploy/local-stack.js';
import { defaultLedgerConfig } from '../../ledger/ledger.js';
import { describeLedger } from '../../ledger/open-ledger.js';
import { amqpUrlFrom, queueTypeFrom } from '../amqp-url.js';
import { checkJobModules } from '../job-modules.js';
import { describeSandbox, sandboxArgs, sandboxPolicy } from '../sandbox-options.js';
import { checkLeaseTiming, ledgerChoice, metricsListener } from '../options.js';
import { grantWindowMsFrom, retainMsFrom, submitTenantFrom } from '../service-options.js';
import { objectStoreFrom, storeCleanupFrom } from '../store-options.js';
import type { UpFlags } from './up.js';

export async function runUp(flags: UpFlags): Promise<void> {
  // Both halves run here, so the rule between them is checked before anything starts.
  checkLeaseTiming(flags.leaseTtl, flags.heartbeatInterval);
  // The workers would load these; checked here first, so a broken one stops `up` with one line instead of a restart loop.
  await checkJobModules(flags.jobs ?? []);
  // Checked here too (the workers check it again), so a missing bubblewrap stops `up` with one line.
  const sandbox = sandboxPolicy(flags, []);
  const objectStore = await objectStoreFrom(flags);
  const storeCleanup = storeCleanupFrom(flags);
  // up's console is for people: what happens, at info, in lines to read (PLANRUN_LOG_FORMAT=json for JSON);
  // PLANRUN_LOG_LEVEL=warn for problems only.
  const logLevel = process.env.PLANRUN_LOG_LEVEL ?? 'info';
  const logFormat = process.env.PLANRUN_LOG_FORMAT === 'json' ? 'json' : 'console';
  const logger = createLogger('planrun-orchestrator', logLevel, logFormat);
  const amqp = amqpUrlFrom(flags);
  const queueType = queueTypeFrom(flags, amqp);
  const submitTenant = submitTenantFrom(flags, amqp !== undefined);
  const stack = await LocalStack.start({
    dataDir: flags.dataDir,
    ...ledgerChoice(flags.ledger),
    host: flags.host,
    port: flags.port,
    ...metricsListener(flags),
    rateLimit: flags.rateLimit,
    ...(amqp ? { amqp, queueType } : {}),
    submitTenant,
    ...(objectStore ? { objectStore } : {}),
    ...(storeCleanup ? { storeCleanup } : {}),
    ...retainMsFrom(flags),
    metricsTenantLabel: flags.metricsTenantLabel ?? false,
    workers: flags.workers,
    slots: flags.slots,
    jobs: flags.jobs ?? [],
    capabilities: flags.capabilities ?? [],
    workerSandboxArgs: sandboxArgs(flags),
    jobUser: sandbox.jobUser !== undefined,
    ledgerConfig: {
      ...defaultLedgerConfig,
      leaseTtlMs: flags.leaseTtl,
      defaultMaxAttempts: flags.maxAttempts,
      backoffBaseMs: flags.backoff,
      dispatch: flags.dispatch,
      ...grantWindowMsFrom(flags),
    },
    sweepIntervalMs: flags.sweepInterval,
    heartbeatIntervalMs: flags.heartbeatInterval,
    stopGraceMs: flags.stopGrace,
    prefix: flags.prefix,
    logger,
    workerLogLevel: logLevel,
    workerLogFormat: logFormat,
  });
  let stopping = false;
  const stop = async () => {
    if (stopping) {
      console.log('planrun: stopping now (running jobs are handed back)…');
      stack.hurry();
      return;
    }
    stopping = true;
    console.log(`planrun: stopping (workers finish their jobs first, for up to ${flags.stopGrace / 1000} s; Ctrl-C again to stop now)…`);
    await stack.stop();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop());
  process.on('SIGTERM', () => void stop());
  // The workers have a process group of their own (supervisor.ts): a closed terminal must stop them through here.
  process.on('SIGHUP', () => void stop());
  const dataDir = relative(process.cwd(), flags.dataDir) || '.';
  console.log(
    [
      'planrun is up',
      `  dashboard ${stack.url}/   (sign in with the key below)`,
      `  API       ${stack.url}/v1   (OpenAPI ${stack.url}/openapi.json)`,
      `  metrics   ${stack.service.metricsUrl}   (${flags.metricsPort === undefined ? 'with the key below' : 'no key'})`,
      `  broker    ${stack.brokerDescription}`,
      `  ledger    ${describeLedger(ledgerChoice(flags.ledger).ledger, dataDir)}`,
      `  outputs   ${objectStore ? objectStore.describe() : join(dataDir, 'outputs')}`,
      `  workers   ${flags.workers} × ${flags.slots} slots, restarted when they exit`,
      `  sandbox   ${describeSandbox(flags)}`,
      `  limits    ${new LimitEnforcement({ jobUser: sandbox.jobUser !== undefined }).describe()}`,
      `  key       ${stack.key}   (tenant "${localTenant}", saved in ${join(dataDir, localKeyFile)})`,
      '',
      `Try:  npx planrun submit transcode --input '{}' --wait`,
      'Stop with Ctrl-C.',
    ].join('\n'),
  );
}
