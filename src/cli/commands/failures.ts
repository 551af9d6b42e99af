import type { Command } from 'commander';
import type { FailureGroupView } from '../../client/types.js';
import { clientFor, clientOptions, talkingToApi, type ClientFlags } from '../client-options.js';
import { shortTime, table } from '../job-output.js';

interface FailuresFlags extends ClientFlags {
  since?: string;
  until?: string;
  tenant?: string;
  json?: boolean;
}

export function registerFailuresCommand(program: Command): void {
  clientOptions(
    program
      .command('failures')
      .description('the holding area: failed jobs not retried yet, one line per (type, error code), largest first; retry a line with planrun retry --failed')
      .option('--since <time>', 'only jobs that ended at or after this ISO 8601 time')
      .option('--until <time>', 'only jobs that ended before this ISO 8601 time')
      .option('--tenant <tenant>', "with an admin key: only this tenant's jobs")
      .option('--json', 'print the groups as the API returns them'),
  ).action(async (flags: FailuresFlags) => {
    const client = clientFor(flags);
    const groups = await talkingToApi(flags, () => client.failures({ endedAfter: flags.since, endedBefore: flags.until, tenant: flags.tenant }));
    console.log(flags.json ? JSON.stringify(groups, null, 2) : formatFailures(groups));
  });
}

function formatFailures(groups: FailureGroupView[]): string {
  if (groups.length === 0) return 'no failed jobs waiting';
  return table(
    ['TYPE', 'CODE', 'JOBS', 'FIRST', 'LAST', 'SAMPLE'],
    groups.map((g) => [g.type, g.code, String(g.count), shortTime(g.firstEndedAt), shortTime(g.lastEndedAt), g.sampleJobId]),
  );
}
