#!/usr/bin/env node
/**
 * `npm run chaos -- [--jobs N] [--duration S] [--seed S] [--broker rabbitmq|embedded] ...`:
 * a fault-injection run of planrun with a history checker. See docs/chaos.md.
 */
import { describeFault } from './plan.js';
import { parseChaosArgs, usage, UsageError } from './options.js';
import { emergencyStop, planOf, runChaos } from './run.js';

const log = (message: string) => process.stderr.write(`[chaos ${new Date().toISOString().slice(11, 23)}] ${message}\n`);

async function main(): Promise<number> {
  let parsed;
  try {
    parsed = parseChaosArgs(process.argv.slice(2), log);
  } catch (error) {
    if (error instanceof UsageError) {
      if (error.message) console.error(`chaos: ${error.message}`);
      console.error(usage);
      return 2;
    }
    throw error;
  }
  const { options, planOnly, json } = parsed;
  const plan = planOf(options);
  if (planOnly) {
    const mix: Record<string, number> = {};
    for (const job of plan.jobs) mix[job.input.behaviour] = (mix[job.input.behaviour] ?? 0) + 1;
    const repeats = plan.jobs.filter((j) => j.submissions.length > 1).length;
    const http = plan.jobs.filter((j) => j.submissions[0]!.transport === 'http').length;
    console.log(`seed ${options.seed} (${options.broker} broker): fault schedule ${plan.fingerprint.faults}, jobs ${plan.fingerprint.jobs}`);
    for (const fault of plan.faults) console.log(`  ${describeFault(fault)}`);
    console.log(
      `  ${plan.jobs.length} jobs: ${Object.entries(mix)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')}; ${repeats} sent twice; ${http} first over HTTP`,
    );
    return 0;
  }
  const outcome = await runChaos(options);
  console.log(json ? JSON.stringify(outcome.report, null, 2) : outcome.text);
  if (outcome.kept) log(`history, logs and report kept in ${outcome.runDir}`);
  return outcome.report.ok ? 0 : 1;
}

let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (stopping) process.exit(130);
    stopping = true;
    log(`${signal}: stopping every process of the run and its RabbitMQ node (again to force)`);
    void emergencyStop().finally(() => process.exit(130));
  });
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
