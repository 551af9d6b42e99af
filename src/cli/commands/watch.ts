import type { Command } from 'commander';
import { clientFor, clientOptions, type ClientFlags } from '../client-options.js';
import { follow } from './submit.js';

export function registerWatchCommand(program: Command): void {
  clientOptions(
    program
      .command('watch')
      .description('follow a job with a live progress bar (on stderr) until it ends, then print its final state (exit 0 if it finished, 1 if it failed)')
      .argument('<id>', 'the job id'),
  ).action((id: string, flags: ClientFlags) => follow(clientFor(flags), id, flags));
}
