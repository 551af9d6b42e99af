import type { Command } from 'commander';
import type { LogLine } from '../../wire/logs.js';
import { clientFor, clientOptions, talkingToApi, type ClientFlags } from '../client-options.js';
import { positiveIntOption } from '../options.js';

interface LogsFlags extends ClientFlags {
  attempt?: number;
  follow?: boolean;
  timestamps?: boolean;
  json?: boolean;
}

export function registerLogsCommand(program: Command): void {
  clientOptions(
    program
      .command('logs')
      .description(
        "print what a job's attempt printed (stdout, stderr) and logged (ctx.log): its first 64 KiB and last 1 MiB, " +
          'with a line saying what was dropped between',
      )
      .argument('<id>', 'the job id')
      .option('--attempt <n>', "which attempt (default: the job's latest)", positiveIntOption)
      .option('-f, --follow', 'keep printing new lines as the attempt runs, until it ends')
      .option('-t, --timestamps', 'start each line with its time and stream (stdout, stderr, log)')
      .option('--json', 'print each line as the API returns it (JSON lines)'),
  ).action((id: string, flags: LogsFlags) => printLogs(id, flags));
}

async function printLogs(id: string, flags: LogsFlags): Promise<void> {
  const client = clientFor(flags);
  const options = flags.attempt === undefined ? {} : { attempt: flags.attempt };
  const print = (line: LogLine) => process.stdout.write(`${format(line, flags)}\n`);
  if (!flags.follow) {
    for (const line of await talkingToApi(flags, () => client.logs(id, options))) print(line);
    return;
  }
  await talkingToApi(flags, async () => {
    for await (const line of client.followLogs(id, options)) print(line);
  });
}

function format(line: LogLine, flags: LogsFlags): string {
  if (flags.json) return JSON.stringify(line);
  const text = `${line.message}${line.fields ? ` ${JSON.stringify(line.fields)}` : ''}`;
  return flags.timestamps ? `${line.time} ${line.stream} ${text}` : text;
}
