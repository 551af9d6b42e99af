#!/usr/bin/env node
import { Command, CommanderError } from 'commander';
import { LedgerError } from '../ledger/errors.js';
import { version } from '../version.js';
import { registerCancelCommand } from './commands/cancel.js';
import { registerDemoCommand } from './commands/demo.js';
import { registerDownloadCommand } from './commands/download.js';
import { registerFailuresCommand } from './commands/failures.js';
import { registerFleetCommand } from './commands/fleet.js';
import { registerJobsCommand } from './commands/jobs.js';
import { registerKeysCommand } from './commands/keys.js';
import { registerLedgerCommand } from './commands/ledger.js';
import { registerOrchestratorCommand } from './commands/orchestrator.js';
import { registerRabbitmqCommand } from './commands/rabbitmq.js';
import { registerRetryCommand } from './commands/retry.js';
import { registerStatusCommand } from './commands/status.js';
import { registerSubmitCommand } from './commands/submit.js';
import { registerTenantsCommands } from './commands/tenants.js';
import { registerWatchCommand } from './commands/watch.js';
import { registerLogsCommand } from './commands/logs.js';
import { registerUpCommand } from './commands/up.js';
import { registerWorkerCommand } from './commands/worker.js';
import { ExitCode } from './exit-codes.js';
import { CommandFailure, UsageError } from './options.js';

const program = new Command();
program
  .name('planrun')
  .description('Long jobs over an at-least-once queue, each with an exactly-once effect.')
  .version(version)
  .showHelpAfterError()
  // Commander's own errors (an unknown option, a bad value, a missing argument) throw
  // instead of exiting 1, so that every usage error exits 2 (below). Commands made after
  // this line inherit it.
  .exitOverride();
registerUpCommand(program);
registerOrchestratorCommand(program);
registerWorkerCommand(program);
registerLedgerCommand(program);
registerSubmitCommand(program);
registerStatusCommand(program);
registerWatchCommand(program);
registerLogsCommand(program);
registerJobsCommand(program);
registerCancelCommand(program);
registerRetryCommand(program);
registerFailuresCommand(program);
registerDownloadCommand(program);
registerFleetCommand(program);
registerKeysCommand(program);
registerTenantsCommands(program);
registerRabbitmqCommand(program);
registerDemoCommand(program);

try {
  await program.parseAsync();
} catch (error) {
  // Commander has printed its message (or the help, or the version) already.
  if (error instanceof CommanderError) process.exit(error.exitCode === 0 ? ExitCode.ok : ExitCode.usage);
  // Errors a user can act on get one clear line, not a stack trace.
  if (error instanceof CommandFailure) {
    console.error(`planrun: ${error.message}`);
    process.exit(error.exitCode);
  }
  if (
    error instanceof UsageError ||
    error instanceof LedgerError ||
    (error instanceof Error && ['BrokerError', 'KeyStoreError', 'ListenError', 'RabbitmqctlError'].includes(error.name))
  ) {
    console.error(`planrun: ${error.message}`);
    process.exit(ExitCode.usage);
  }
  throw error;
}
