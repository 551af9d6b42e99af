import type { Command } from 'commander';
import { clientFor, clientOptions, talkingToApi, type ClientFlags } from '../client-options.js';
import { formatJob } from '../job-output.js';

interface StatusFlags extends ClientFlags {
  json?: boolean;
}

export function registerStatusCommand(program: Command): void {
  clientOptions(
    program
      .command('status')
      .description('show a job: state, attempt, progress, result or error, and its attempts')
      .argument('<id>', 'the job id')
      .option('--json', 'print the job as the API returns it'),
  ).action(async (id: string, flags: StatusFlags) => {
    const client = clientFor(flags);
    const job = await talkingToApi(flags, () => client.get(id));
    console.log(flags.json ? JSON.stringify(job, null, 2) : formatJob(job));
  });
}
