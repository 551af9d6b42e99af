import { readFileSync } from 'node:fs';
import { Option, type Command } from 'commander';
import { UsageError } from './options.js';

/** Where a command may take its RabbitMQ URL from. */
export interface AmqpFlags {
  amqp?: string;
  amqpFile?: string;
}

/**
 * `--amqp URL` and `--amqp-file PATH` on a command. A URL with a password belongs in
 * PLANRUN_AMQP_URL or a file: a command line is readable by every user of the machine
 * (`ps`, /proc/PID/cmdline), and by every process a worker starts.
 */
export function addAmqpOptions(command: Command, description = 'RabbitMQ URL, without a password (or PLANRUN_AMQP_URL)'): Command {
  return command
    .option('--amqp <url>', description)
    .addOption(new Option('--amqp-file <path>', 'a file holding the RabbitMQ URL, password included (instead of --amqp)').conflicts('amqp'));
}

let warnedAboutArgv = false;

/**
 * The RabbitMQ URL from `--amqp-file`, `--amqp` or PLANRUN_AMQP_URL, in that order, if
 * any is set. A password given with `--amqp` works, with a warning on stderr (once, the
 * password not repeated).
 */
export function amqpUrlFrom(flags: AmqpFlags): string | undefined {
  if (flags.amqpFile !== undefined) return readUrlFile(flags.amqpFile);
  if (flags.amqp !== undefined) {
    if (hasPassword(flags.amqp) && !warnedAboutArgv) {
      warnedAboutArgv = true;
      console.error(
        'planrun: warning: --amqp carries a password, which any user of this machine can read on the command line (ps, /proc/PID/cmdline); ' +
          'put the URL in PLANRUN_AMQP_URL or in a file named by --amqp-file instead',
      );
    }
    return flags.amqp;
  }
  return process.env.PLANRUN_AMQP_URL || undefined;
}

function readUrlFile(path: string): string {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new UsageError(`--amqp-file ${path}: no such file`);
    throw new UsageError(`--amqp-file ${path}: cannot read it (${code ?? (error as Error).message})`);
  }
  const url = text.trim();
  if (url === '') throw new UsageError(`--amqp-file ${path} is empty: it should hold the RabbitMQ URL (amqp://user:password@host:port/vhost)`);
  if (/\s/.test(url)) throw new UsageError(`--amqp-file ${path} should hold one RabbitMQ URL and nothing else`);
  return url;
}

function hasPassword(url: string): boolean {
  try {
    return new URL(url).password !== '';
  } catch {
    // Not a URL the broker could use either; connecting says so. Whether it holds a secret is unknown.
    return url.includes('@');
  }
}
