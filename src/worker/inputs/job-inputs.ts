import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { PermanentError, TransientError } from '../../core/errors.js';
import type { LeaseLoss } from '../../ledger/ledger.js';
import type { ControlClient } from '../control-client.js';
import { describeError } from '../describe-error.js';
import type { HeldLease } from '../lease-book.js';
import type { JobType } from '../runner/job-type.js';
import { fetchFile } from './fetch-file.js';

/** The folder of the scratch folder inputs are fetched into: `<scratch>/inputs/<field>/<file name>`. */
export const inputsFolder = 'inputs';

export interface InputFetching {
  /** Largest input file, for a job type that declares no `maxInputBytes`. */
  maxInputBytes: number;
  /** A fetch that gets no byte for this long fails Transient `input_unreachable`. */
  idleTimeoutMs: number;
}

export const defaultInputFetching: InputFetching = { maxInputBytes: 8 * 1024 ** 3, idleTimeoutMs: 30_000 };

/** The lease was found lost while asking for input URLs: the attempt stops, as on any lease loss. */
export class InputLeaseLost extends Error {
  override readonly name = 'InputLeaseLost';
  constructor(readonly reason: LeaseLoss) {
    super(`lease lost while fetching inputs: ${reason}`);
  }
}

const fetchedScheme = /^(https?|s3):\/\//i;

/**
 * Fetches the input files a job type declares (`inputFiles`) into the attempt's scratch
 * folder, and returns the input the job gets: each such field that held an `https://`,
 * `http://` or `s3://` URL now holds the fetched file's absolute path; anything else (a
 * local path, a field left out) is left as it is. `s3://` URLs are read through presigned
 * GETs the orchestrator hands a live lease (the `inputs` control request): the worker
 * holds no storage credential. Throws the job's error (see fetchFile; a refused `s3://`
 * location is Permanent `input_refused`), or InputLeaseLost; a failed fetch leaves
 * nothing in the scratch folder.
 */
export async function fetchJobInputs(
  type: JobType,
  input: unknown,
  context: { lease: HeldLease; scratchDir: string; control: ControlClient; fetching: InputFetching },
): Promise<unknown> {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) return input;
  const given = input as Record<string, unknown>;
  const urls = new Map<string, string>();
  for (const field of type.inputFiles ?? []) {
    const value = given[field];
    if (typeof value !== 'string' || !fetchedScheme.test(value)) continue;
    if (!URL.canParse(value)) throw new PermanentError('invalid_input', `input field ${field}: ${JSON.stringify(value)} is not a valid URL`);
    urls.set(field, value);
  }
  if (urls.size === 0) return input;
  const { scratchDir, fetching } = context;
  const signed = await presignedGets(
    [...urls.values()].filter((url) => /^s3:/i.test(url)),
    context,
  );
  const root = join(scratchDir, inputsFolder);
  const fetched: Record<string, string> = {};
  try {
    for (const [field, url] of urls) {
      const folder = join(root, safeName(field, 'field'));
      await mkdir(folder, { recursive: true });
      const target = join(folder, fileNameOf(url));
      const source = /^s3:/i.test(url) ? signed.get(url) : url;
      if (source === undefined) throw new PermanentError('input_refused', `the orchestrator handed no URL for input ${url}`);
      await fetchFile(source, target, {
        label: url,
        maxBytes: type.maxInputBytes ?? fetching.maxInputBytes,
        idleTimeoutMs: fetching.idleTimeoutMs,
        signal: context.lease.abort.signal,
      });
      fetched[field] = target;
    }
  } catch (error) {
    await rm(root, { recursive: true, force: true }).catch(() => undefined);
    throw error;
  }
  return { ...given, ...fetched };
}

async function presignedGets(locations: string[], { lease, control }: { lease: HeldLease; control: ControlClient }): Promise<Map<string, string>> {
  if (locations.length === 0) return new Map();
  const distinct = [...new Set(locations)];
  let reply;
  try {
    reply = await control.inputs({ jobId: lease.jobId, attempt: lease.attempt, token: lease.token, tenant: lease.tenant, locations: distinct });
  } catch (error) {
    throw new TransientError('input_unreachable', `the orchestrator could not be asked for the URLs of ${distinct.join(', ')}: ${describeError(error)}`);
  }
  if (!reply.live) throw new InputLeaseLost(reply.reason);
  if (reply.refused) throw new PermanentError('input_refused', reply.refused);
  return new Map((reply.downloads ?? []).map(({ location, url }) => [location, url]));
}

/** The last path segment of a URL, decoded, as a file name that stays in its folder. */
function fileNameOf(url: string): string {
  const last = new URL(url).pathname.split('/').pop() ?? '';
  let decoded = last;
  try {
    decoded = decodeURIComponent(last);
  } catch {
    // A malformed escape: keep the raw segment, made safe below.
  }
  return safeName(decoded, 'input');
}

function safeName(name: string, fallback: string): string {
  const safe = name.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 200);
  return safe === '' || /^\.+$/.test(safe) ? fallback : safe;
}
