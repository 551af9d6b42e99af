import type { Command } from 'commander';
import { isPlanrunApiError } from '../../client/errors.js';
import { clientFor, clientOptions, talkingToApi, type ClientFlags } from '../client-options.js';
import { ExitCode } from '../exit-codes.js';
import { CommandFailure, UsageError } from '../options.js';

interface RetryFlags extends ClientFlags {
  failed?: boolean;
  type?: string;
  code?: string;
  since?: string;
  until?: string;
  tenant?: string;
}

export function registerRetryCommand(program: Command): void {
  clientOptions(
    program
      .command('retry')
      .description(
        'retry a failed (or cancelled) job as a new job, linked to it, and print the new id; ' +
          'or, with --failed, every failed job not retried yet that matches --type, --code, --since and --until ' +
          '(cancelled ones left out), printing each new id and how many (exit 0; 1 if the job did not fail)',
      )
      .argument('[id]', 'the failed job')
      .option('--failed', 'retry every failed job matching the filters instead of one')
      .option('--type <type>', 'with --failed: only jobs of this type')
      .option('--code <code>', 'with --failed: only jobs that failed with this error code')
      .option('--since <time>', 'with --failed: only jobs that ended at or after this ISO 8601 time')
      .option('--until <time>', 'with --failed: only jobs that ended before this ISO 8601 time (default: now)')
      .option('--tenant <tenant>', "with --failed and an admin key: only this tenant's jobs (default: every tenant's)"),
  ).action((id: string | undefined, flags: RetryFlags) => (flags.failed ? retryFailed(id, flags) : retryOne(id, flags)));
}

async function retryOne(id: string | undefined, flags: RetryFlags): Promise<void> {
  if (id === undefined) throw new UsageError('name the failed job (planrun retry <id>), or retry many with --failed');
  const filters = (['type', 'code', 'since', 'until', 'tenant'] as const).filter((name) => flags[name] !== undefined);
  if (filters.length > 0) throw new UsageError(`--${filters[0]} filters a bulk retry: add --failed and leave out the job id`);
  const client = clientFor(flags);
  const job = await talkingToApi(flags, async () => {
    try {
      return await client.retry(id);
    } catch (error) {
      if (isPlanrunApiError(error) && error.code === 'not_failed') throw new CommandFailure(error.message, ExitCode.failed);
      throw error;
    }
  });
  if (!job.created) console.error(`job ${id} was retried before: its retry is ${job.id}`);
  console.log(job.id);
}

async function retryFailed(id: string | undefined, flags: RetryFlags): Promise<void> {
  if (id !== undefined) throw new UsageError('--failed retries every failed job matching the filters: leave out the job id, or drop --failed');
  const client = clientFor(flags);
  const answer = await talkingToApi(flags, () =>
    client.retryFailed({ type: flags.type, code: flags.code, endedAfter: flags.since, endedBefore: flags.until, tenant: flags.tenant }),
  );
  for (const job of answer.jobs) console.log(job.id);
  console.error(`retried ${answer.retried} failed job${answer.retried === 1 ? '' : 's'}`);
}
