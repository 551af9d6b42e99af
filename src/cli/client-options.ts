/**
 * What the client commands (`submit`, `status`, `watch`, `jobs`) share: where the API
 * is, which key to use, and how a failure to talk to it reads on a terminal.
 *
 * The URL is `--url`, else PLANRUN_URL, else the one `planrun up` saved in
 * `<data-dir>/local-url`, else http://127.0.0.1:7700. The key is `--key`, else
 * PLANRUN_KEY, else the one `planrun up` saved in `<data-dir>/local-key`.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Command } from 'commander';
import { Client } from '../client/client.js';
import { ApiErrorCode, isPlanrunApiError } from '../client/errors.js';
import { localKeyFile, localUrlFile } from '../deploy/local-key.js';
import { ExitCode } from './exit-codes.js';
import { CommandFailure, UsageError } from './options.js';

export const defaultApiUrl = 'http://127.0.0.1:7700';
export const defaultDataDir = './.planrun';

export interface ClientFlags {
  url?: string;
  key?: string;
  dataDir: string;
}

/** Adds `--url`, `--key` and `--data-dir` to a client command (the saved URL wins over the default). */
export function clientOptions(command: Command): Command {
  return command
    .option(
      '--url <url>',
      `where the planrun API listens (or PLANRUN_URL; default: the URL planrun up saved in <data-dir>/${localUrlFile}, else ${defaultApiUrl})`,
    )
    .option('--key <key>', `API key (or PLANRUN_KEY; default: the one planrun up saved in <data-dir>/${localKeyFile})`)
    .option('--data-dir <dir>', 'where planrun up keeps its data, to find its saved URL and key', defaultDataDir);
}

export function apiUrl(flags: ClientFlags): string {
  return flags.url ?? nonEmpty(process.env.PLANRUN_URL) ?? savedUrl(flags.dataDir) ?? defaultApiUrl;
}

function savedUrl(dataDir: string): string | undefined {
  try {
    return nonEmpty(readFileSync(join(dataDir, localUrlFile), 'utf8').trim());
  } catch {
    return undefined;
  }
}

export function apiKey(flags: ClientFlags): string {
  const key = flags.key ?? nonEmpty(process.env.PLANRUN_KEY);
  if (key) return key;
  const file = join(flags.dataDir, localKeyFile);
  let saved: string;
  try {
    saved = readFileSync(file, 'utf8').trim();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw new UsageError(`cannot read the saved API key ${file}: ${(error as Error).message}`);
    saved = '';
  }
  if (saved) return saved;
  throw new UsageError(
    `no API key: none given with --key or PLANRUN_KEY, and none saved in ${file}. ` +
      '`planrun up` prints one and saves it there (run it in this directory, or pass --data-dir); ' +
      'for another tenant create one with `planrun keys create --tenant T`.',
  );
}

export function clientFor(flags: ClientFlags): Client {
  const url = apiUrl(flags);
  const key = apiKey(flags);
  try {
    return new Client({ url, key });
  } catch (error) {
    throw new UsageError(`--url: ${(error as Error).message.replace(/^planrun client: /, '')}`);
  }
}

/**
 * Runs a client command's body, turning the client's errors into one line a user can
 * act on (main prints it and exits 2).
 */
export async function talkingToApi<T>(flags: ClientFlags, body: () => Promise<T>): Promise<T> {
  try {
    return await body();
  } catch (error) {
    if (!isPlanrunApiError(error)) throw error;
    switch (error.code) {
      case 'unreachable':
        throw new UsageError(`${error.message}. Is planrun running? Start it with \`planrun up\`, or point --url (or PLANRUN_URL) at it.`);
      case 'unauthorized':
        throw new UsageError(
          `${apiUrl(flags)} refused the API key (${error.message}). Pass a valid one with --key or PLANRUN_KEY, ` +
            `or use the one \`planrun up\` saved in ${join(flags.dataDir, localKeyFile)}.`,
        );
      case ApiErrorCode.outputMismatch:
        throw new CommandFailure(error.message, ExitCode.outputMismatch);
      default:
        throw new UsageError(`${error.message} (${error.code}${error.status ? `, HTTP ${error.status}` : ''})`);
    }
  }
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}
