/**
 * The operator's endpoints of issue 14 (job logs, redrive, the failures holding area), as
 * that issue documents them. An orchestrator without them answers 404 "no route", which
 * the pages show as such (ApiFailure kind `missing-endpoint`).
 */
import type { JobSummary } from '../../src/wire/jobs.js';
import { getJson, jobPath, postJson, query, request } from './api.js';

/** The links between a failed job and the job a retry made from it (on jobs, once the server has them). */
export interface RetryLinks {
  retryOf?: string | null;
  retriedBy?: string | null;
}

/** One line of an attempt's log: `GET /v1/jobs/:id/attempts/:n/logs` as JSON lines, or a `line` event of `?follow=1`. */
export interface LogLine {
  time: string;
  stream: string;
  message: string;
  fields?: Record<string, unknown>;
}

/** One group of the holding area: failed jobs of one type that failed with one error code. */
export interface FailureGroup {
  type: string;
  code: string;
  count: number;
  firstEndedAt?: string;
  lastEndedAt?: string;
  sampleJobId?: string;
}

export const logsPath = (jobId: string, attempt: number) => `${jobPath(jobId)}/attempts/${attempt}/logs`;

/** An attempt's log as lines; a server answering plain text gets one line per text line. */
export async function getLogs(key: string, jobId: string, attempt: number): Promise<LogLine[]> {
  const response = await request(key, logsPath(jobId, attempt), { headers: { accept: 'application/x-ndjson' } });
  const text = await response.text();
  const json = (response.headers.get('content-type') ?? '').includes('json');
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => (json ? (JSON.parse(line) as LogLine) : { time: '', stream: '', message: line }));
}

/** `POST /v1/jobs/:id/retry`: the new job made from a failed or cancelled one. */
export function retryJob(key: string, jobId: string): Promise<JobSummary & RetryLinks> {
  return postJson(key, `${jobPath(jobId)}/retry`);
}

/** `POST /v1/jobs/retry`: redrives every failed job of a type and error code; answers how many. */
export async function retryGroup(key: string, group: Pick<FailureGroup, 'type' | 'code'>): Promise<number> {
  const answer = await postJson<{ retried: number }>(key, '/v1/jobs/retry', { type: group.type, code: group.code });
  return answer.retried;
}

export async function getFailureGroups(key: string, tenant: string | undefined): Promise<FailureGroup[]> {
  const answer = await getJson<{ groups: FailureGroup[] }>(key, `/v1/failures${query({ tenant })}`);
  return answer.groups;
}
