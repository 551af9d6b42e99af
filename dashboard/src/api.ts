/**
 * The dashboard's one way to the orchestrator's API: every request carries the signed-in
 * key as `Authorization: Bearer KEY` (src/api/auth.ts), and every failure becomes an
 * ApiFailure that says which of the cases a user must tell apart it is.
 */
import type { FleetView } from '../../src/wire/fleet.js';
import type { JobPage, JobView } from '../../src/wire/jobs.js';

export type { FleetView, JobPage, JobView };
export type { FleetWorker } from '../../src/wire/fleet.js';
export type { AttemptView, JobState, JobSummary } from '../../src/wire/jobs.js';

/**
 * What went wrong, as a user tells it apart:
 * - `unreachable`: no answer at all (the orchestrator is down, or the network);
 * - `unauthorized`: the key is wrong or revoked;
 * - `missing-endpoint`: this orchestrator has no such route (an older version);
 * - `http`: any other refusal, with the API's own message.
 */
export type FailureKind = 'unreachable' | 'unauthorized' | 'missing-endpoint' | 'http';

export class ApiFailure extends Error {
  constructor(
    readonly kind: FailureKind,
    message: string,
    readonly status?: number,
    readonly code?: string,
  ) {
    super(message);
    this.name = 'ApiFailure';
  }
}

interface ErrorBody {
  error?: { code?: string; message?: string };
}

/** A request to the API with `key`; answers the response when it is 2xx, throws an ApiFailure otherwise. */
export async function request(key: string, path: string, init: RequestInit = {}): Promise<Response> {
  let response: Response;
  try {
    response = await fetch(path, { ...init, headers: { ...init.headers, authorization: `Bearer ${key}` } });
  } catch (error) {
    if (error instanceof DOMException && error.name === 'AbortError') throw error;
    throw new ApiFailure('unreachable', `cannot reach the orchestrator (${error instanceof Error ? error.message : String(error)})`);
  }
  if (response.ok) return response;
  // A proxy in front of a stopped orchestrator answers 502-504 without the API's error body.
  if (response.status >= 502 && response.status <= 504) throw new ApiFailure('unreachable', `the orchestrator does not answer (HTTP ${response.status})`);
  const body = (await response.json().catch(() => ({}))) as ErrorBody;
  const message = body.error?.message ?? `HTTP ${response.status} ${response.statusText}`;
  if (response.status === 401) throw new ApiFailure('unauthorized', message, 401, body.error?.code);
  // The API's 404 for a path it has no route for reads "no route GET /v1/…" (src/api/errors.ts).
  if (response.status === 404 && message.startsWith('no route ')) {
    throw new ApiFailure('missing-endpoint', message, 404, body.error?.code);
  }
  throw new ApiFailure('http', message, response.status, body.error?.code);
}

export async function getJson<T>(key: string, path: string): Promise<T> {
  return (await (await request(key, path)).json()) as T;
}

export async function postJson<T>(key: string, path: string, body?: unknown): Promise<T> {
  const init: RequestInit =
    body === undefined ? { method: 'POST' } : { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) };
  return (await (await request(key, path, init)).json()) as T;
}

/** A query string from the defined values of `params`. */
export function query(params: Record<string, string | number | undefined>): string {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) if (value !== undefined && value !== '') search.set(name, String(value));
  const text = search.toString();
  return text ? `?${text}` : '';
}

export const jobPath = (id: string) => `/v1/jobs/${encodeURIComponent(id)}`;

/** Who a key acts for: a tenant's key sees its tenant; an admin key sees every tenant and may filter by one. */
export type KeyKind = 'tenant' | 'admin';

/**
 * Whether `key` works and what kind it is. The API has no "who am I": a tenant key is
 * refused the admin's `tenant` filter on `GET /v1/jobs` (400), an admin key is not.
 */
export async function identifyKey(key: string): Promise<KeyKind> {
  try {
    await request(key, `/v1/jobs${query({ tenant: 'planrun-dashboard-probe', limit: 1 })}`);
    return 'admin';
  } catch (error) {
    if (error instanceof ApiFailure && error.kind === 'http' && error.status === 400) return 'tenant';
    throw error;
  }
}

/** Saves one output of a job as a file: the download needs the key, which a plain link cannot send. */
export async function downloadOutput(key: string, jobId: string, name: string): Promise<void> {
  const response = await request(key, `${jobPath(jobId)}/outputs/${name.split('/').map(encodeURIComponent).join('/')}`);
  const url = URL.createObjectURL(await response.blob());
  try {
    const link = document.createElement('a');
    link.href = url;
    link.download = name.split('/').at(-1) ?? name;
    document.body.append(link);
    link.click();
    link.remove();
  } finally {
    // The click has handed the blob to the download; revoke after this task, once it has started.
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  }
}
