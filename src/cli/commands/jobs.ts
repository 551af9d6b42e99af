import type { Command } from 'commander';
import { InvalidArgumentError } from 'commander';
import type { JobState } from '../../client/types.js';
import { clientFor, clientOptions, talkingToApi, type ClientFlags } from '../client-options.js';
import { formatJobTable } from '../job-output.js';
import { positiveIntOption } from '../options.js';

interface JobsFlags extends ClientFlags {
  state?: JobState;
  type?: string;
  limit: number;
  cursor?: string;
  json?: boolean;
}

const states: readonly JobState[] = ['queued', 'running', 'finished', 'failed'];

function stateOption(value: string): JobState {
  if (!(states as readonly string[]).includes(value)) throw new InvalidArgumentError(`expected one of ${states.join(', ')}, got "${value}"`);
  return value as JobState;
}

export function registerJobsCommand(program: Command): void {
  clientOptions(
    program
      .command('jobs')
      .description('list your jobs, newest first, as a table')
      .option('--state <state>', `only jobs in this state (${states.join(', ')})`, stateOption)
      .option('--type <type>', 'only jobs of this type')
      .option('--limit <n>', 'at most this many jobs', positiveIntOption, 20)
      .option('--cursor <cursor>', 'the page after the one that printed this cursor')
      .option('--json', 'print the page as the API returns it'),
  ).action(async (flags: JobsFlags) => {
    const client = clientFor(flags);
    const page = await talkingToApi(flags, () => client.list({ state: flags.state, type: flags.type, limit: flags.limit, cursor: flags.cursor }));
    if (flags.json) {
      console.log(JSON.stringify(page, null, 2));
      return;
    }
    console.log(formatJobTable(page.jobs));
    if (page.nextCursor) {
      const filters = [flags.state && `--state ${flags.state}`, flags.type && `--type ${flags.type}`, `--limit ${flags.limit}`].filter(Boolean);
      console.error(`more: planrun jobs ${filters.join(' ')} --cursor ${page.nextCursor}`);
    }
  });
}
