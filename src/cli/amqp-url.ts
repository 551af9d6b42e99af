import { readFileSync } from 'node:fs';
import { Option, type Command } from 'commander';
import { parseAmqpUrls } from '../broker/amqp-urls.js';
import { queueTypes, type QueueType } from '../broker/rabbitmq-topology.js';
import { UsageError } from './options.js';

/** Where a command may take its RabbitMQ URL from, and how it declares its queues there. */
export interface AmqpFlags {
  /** Every `--amqp` given, joined with commas: one list of the cluster's nodes. */
  amqp?: string;
  amqpFile?: string;
  queueType?: QueueType;
}

/**
 * `--amqp URL` and `--amqp-file PATH` on a command. A URL with a password belongs in
 * PLANRUN_AMQP_URL or a file: a command line is readable by every user of the machine
 * (`ps`, /proc/PID/cmdline), and by every process a worker starts.
 */
export function addAmqpOptions(command: Command, description = 'RabbitMQ URL, without a password (or PLANRUN_AMQP_URL)'): Command {
  return command
    .addOption(
      new Option(
        '--amqp <url>',
        `${description}; a cluster's nodes as several --amqp, or comma-separated (amqp://a,b:5673,c/vhost): it connects to the first that answers and to another when that one is lost`,
      ).argParser((value: string, previous: string | undefined) => (previous === undefined ? value : `${previous},${value}`)),
    )
    .addOption(new Option('--amqp-file <path>', 'a file holding the RabbitMQ URL, password included (instead of --amqp)').conflicts('amqp'))
    .addOption(
      new Option(
        '--queue-type <type>',
        "RabbitMQ: how planrun's queues are declared; quorum replicates them over a cluster (every planrun process on the broker must agree) (default: classic, or PLANRUN_QUEUE_TYPE)",
      )
        .choices(queueTypes)
        .env('PLANRUN_QUEUE_TYPE'),
    );
}

/** The queue type, which only RabbitMQ has: asking for one without it is a mistake worth saying. */
export function queueTypeFrom(flags: AmqpFlags, url: string | undefined): QueueType {
  if (flags.queueType !== undefined && url === undefined) {
    throw new UsageError('--queue-type applies to RabbitMQ (--amqp-file, PLANRUN_AMQP_URL or --amqp); the embedded broker has one kind of queue');
  }
  return flags.queueType ?? 'classic';
}

let warnedAboutArgv = false;

/**
 * The RabbitMQ URL from `--amqp-file`, `--amqp` or PLANRUN_AMQP_URL, in that order, if
 * any is set. A password given with `--amqp` works, with a warning on stderr (once, the
 * password not repeated).
 */
export function amqpUrlFrom(flags: AmqpFlags): string | undefined {
  const url = givenUrl(flags);
  if (url !== undefined) {
    try {
      parseAmqpUrls(url);
    } catch (error) {
      throw new UsageError(`RabbitMQ URL: ${(error as Error).message}`);
    }
  }
  return url;
}

function givenUrl(flags: AmqpFlags): string | undefined {
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
