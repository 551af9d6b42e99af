import { stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { Command } from 'commander';
import type { Client } from '../../client/client.js';
import { ApiErrorCode, isPlanrunApiError } from '../../client/errors.js';
import type { SubmittedJob } from '../../client/types.js';
import { ExitCode } from '../exit-codes.js';
import { clientFor, clientOptions, talkingToApi, type ClientFlags } from '../client-options.js';
import { formatFinal, formatSubmitted, ProgressDisplay } from '../job-output.js';
import { durationOption, listOption, positiveIntOption, UsageError } from '../options.js';
import { humanBytes, TransferProgress } from '../transfer-progress.js';

interface SubmitFlags extends ClientFlags {
  input: string;
  idempotencyKey?: string;
  requires?: string[];
  maxAttempts?: number;
  timeout?: number;
  wait?: boolean;
  file?: string;
  fileField: string;
}

export function registerSubmitCommand(program: Command): void {
  clientOptions(
    program
      .command('submit')
      .description(
        'submit a job and print its id (alone on stdout; its state on stderr; exit 1 if it failed at once); ' +
          'with --wait, follow it to the end (exit 0 if it finished, 1 if it failed)',
      )
      .argument('<type>', 'the job type, e.g. transcode')
      .option('--input <json>', 'the job input, as JSON', '{}')
      .option('--idempotency-key <key>', 'the same key always answers with the same job')
      .option('--requires <capabilities>', 'capabilities a worker needs, comma-separated (e.g. gpu,ffmpeg)', listOption)
      .option('--max-attempts <n>', 'attempts before the job fails as exhausted', positiveIntOption)
      .option('--timeout <duration>', "how long one run may take, e.g. 30m (whole seconds; default: the job type's, else the worker's)", durationOption)
      .option(
        '--file <path>',
        "upload a local file to the orchestrator's object store and pass its s3:// URL in the input field --file-field " +
          '(without a store: the absolute path, for a worker on this machine)',
      )
      .option('--file-field <name>', 'the input field --file fills', 'source')
      .option('--wait', 'show its progress and wait until it ends'),
  ).action((type: string, flags: SubmitFlags) => submit(type, flags));
}

async function submit(type: string, flags: SubmitFlags): Promise<void> {
  const client = clientFor(flags);
  const input = flags.file === undefined ? parseInput(flags.input) : await withFile(client, parseInput(flags.input), flags.file, flags);
  const job = await talkingToApi(flags, () =>
    client.submit(type, input, {
      idempotencyKey: flags.idempotencyKey,
      requires: flags.requires,
      maxAttempts: flags.maxAttempts,
      ...(flags.timeout === undefined ? {} : { timeoutSeconds: timeoutSeconds(flags.timeout) }),
    }),
  );
  // stdout is the id alone, so `ID=$(planrun submit ...)` works; what a person wants to know goes to stderr.
  console.log(job.id);
  if (!job.created) console.error(`planrun: ${reusedKeyNote(job)}`);
  if (flags.wait) return follow(client, job.id, flags);
  console.error(formatSubmitted(job));
  if (job.state === 'failed') process.exitCode = ExitCode.failed;
  else if (job.state !== 'finished') console.error(`follow it with: planrun watch ${job.id}`);
}

/** A reused idempotency key answers with the job it named before, whatever was asked this time. */
function reusedKeyNote(job: SubmittedJob): string {
  return (
    `idempotency key ${JSON.stringify(job.idempotencyKey)} was used before: this is the job it named (a ${job.type} job, submitted ${job.createdAt}), ` +
    'unchanged; nothing new was submitted'
  );
}

/**
 * Follows a job to its end with a progress line on stderr, prints its final state on
 * stdout, and sets the exit code: 0 finished, 1 failed.
 */
export async function follow(client: Client, id: string, flags: ClientFlags): Promise<void> {
  const display = new ProgressDisplay(process.stderr);
  // ^C leaves the terminal on a fresh line; the job itself goes on (cancel it with the API).
  const interrupted = () => {
    display.finish();
    process.exit(ExitCode.interrupted);
  };
  process.once('SIGINT', interrupted);
  try {
    const job = await talkingToApi(flags, () => client.wait(id, { onEvent: (event) => display.update(event) }));
    display.finish();
    console.log(formatFinal(job));
    process.exitCode = job.state === 'finished' ? ExitCode.ok : ExitCode.failed;
  } catch (error) {
    display.finish();
    throw error;
  } finally {
    process.off('SIGINT', interrupted);
  }
}

/**
 * `--file`: the input with `--file-field` naming the file. Uploaded through the presigned
 * PUT `POST /v1/uploads` hands out, it is named by its `s3://` location; an orchestrator
 * without an object store gets the file's absolute path instead, which only a worker on
 * this machine can read, and the user is told so.
 */
async function withFile(client: Client, input: unknown, file: string, flags: SubmitFlags): Promise<Record<string, unknown>> {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) throw new UsageError('--file needs --input to be a JSON object');
  const field = flags.fileField;
  if (Object.hasOwn(input, field)) throw new UsageError(`--input already has a "${field}" field; --file would replace it`);
  const path = resolve(file);
  const isFile = await stat(path).then(
    (stats) => stats.isFile(),
    () => false,
  );
  if (!isFile) throw new UsageError(`--file ${file}: no such file`);
  const progress = new TransferProgress(process.stderr, file);
  const upload = async () => {
    try {
      return await client.upload(path, { onProgress: (sent, total) => progress.update(sent, total) });
    } catch (error) {
      if (isPlanrunApiError(error) && error.code === ApiErrorCode.noObjectStore) return undefined;
      throw error;
    } finally {
      progress.finish();
    }
  };
  const uploaded = await talkingToApi(flags, upload);
  if (!uploaded) {
    console.error(`planrun: the orchestrator has no object store; ${field} is the file's path, ${path}, which only a worker on this machine can read`);
    return { ...input, [field]: path };
  }
  console.error(`planrun: uploaded ${file} (${humanBytes(uploaded.bytes)}) to ${uploaded.location}`);
  return { ...input, [field]: uploaded.location };
}

function parseInput(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new UsageError(`--input is not valid JSON (${(error as Error).message}): ${JSON.stringify(text)}`);
  }
}

/** A run timeout is whole seconds on the wire: `--timeout 1500ms` would silently become 1 s or 2 s. */
function timeoutSeconds(ms: number): number {
  if (ms < 1000 || ms % 1000 !== 0) throw new UsageError(`--timeout must be a whole number of seconds of at least 1s, not ${ms} ms`);
  return ms / 1000;
}
