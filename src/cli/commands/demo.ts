import type { Command } from 'commander';
import { addAmqpOptions, type AmqpFlags } from '../amqp-url.js';
import { positiveIntOption } from '../options.js';

export interface DemoFlags extends AmqpFlags {
  jobs: number;
  broken: number;
  clipSeconds: number;
  keep: boolean;
  prefix?: string;
}

export function registerDemoCommand(program: Command): void {
  addAmqpOptions(
    program.command('demo').description('watch planrun keep its promises: transcodes on a local planrun, a worker killed mid-run, one result message per job'),
    'run the demo on RabbitMQ (URL without a password, or PLANRUN_AMQP_URL) instead of the embedded broker',
  )
    .option('--jobs <n>', 'transcodes that should finish', positiveIntOption, 4)
    .option('--broken <n>', 'transcodes with a filter FFmpeg refuses (they fail once, permanently)', positiveIntOption, 2)
    .option('--clip-seconds <n>', 'length of each generated clip (rendered in real time)', positiveIntOption, 6)
    .option('--keep', 'keep the demo data dir (ledger, outputs) afterwards')
    .option('--prefix <name>', 'prefix of every queue and exchange name (default: planrun-demo-<pid>, apart from any other planrun on the broker)')
    .action(async (flags: DemoFlags) => (await import('./demo-action.js')).demo(flags));
}
