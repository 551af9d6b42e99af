/**
 * The control plane: lease, heartbeat, fence, inputs, renew_upload, complete_upload, progress, logs, settle and release, as request/reply over
 * the broker, so a worker needs no network access beyond the queue it already reads.
 * The requests a worker makes at the same moment travel as one `batch` message, answered
 * by one message with an answer for each, in order: one broker round trip instead of N.
 *
 * Every reply names the operation and the (job, attempt) it answers, so a late reply can
 * never be taken for the answer to another request. Refusals and errors travel as codes:
 * callers branch on `code`, never on a message string or on `instanceof` across the wire.
 */
import { z } from 'zod';
import { boundedLogTail, boundedStack } from '../core/errors.js';
import { maxLogLineChars } from '../wire/logs.js';
import type { GrantRefusal, LeaseLoss, ReleaseResult, SettleResult } from '../ledger/ledger.js';
import type { JobLimits } from '../wire/jobs.js';

/** S3's limit on the parts of one multipart upload. */
export const maxUploadParts = 10_000;

const leaseRef = z.object({
  jobId: z.string().min(1),
  attempt: z.number().int().min(1),
  token: z.string().min(1),
});

/**
 * A secret each worker process makes at start and sends with its lease requests and
 * heartbeats. The orchestrator keeps only its digest, with each lease it grants and with the
 * worker's fleet entry: a worker's name is public (attempts, the fleet), the secret is not,
 * so only the process that won a grant can be given its token again, and only it can speak
 * for its fleet entry.
 */
const workerSecret = z.string().min(16).max(256);

const serializedError = z.object({
  class: z.enum(['permanent', 'transient', 'fatal']),
  code: z.string(),
  message: z.string(),
  // Cut rather than refused: a settle must not fail for the length of a stack.
  stack: z.string().transform(boundedStack).optional(),
  logTail: z.string().transform(boundedLogTail).optional(),
});

/** Most lines one `logs` request carries, and most characters of each (a longer one is cut by the ledger). */
export const maxLogLinesPerRequest = 10_000;

const logEntry = z.object({
  at: z.number().int().min(0),
  stream: z.enum(['stdout', 'stderr', 'log']),
  message: z.string().max(4 * maxLogLineChars),
  fields: z.record(z.string(), z.unknown()).optional(),
});

/**
 * A job type a worker has in its modules but does not offer, for want of capabilities it
 * requires: the fleet can then say what a job of that type is missing, not only that no
 * worker offers it.
 */
const heldBackType = z.object({
  type: z.string(),
  missing: z.array(z.string()),
});
export type HeldBackType = z.infer<typeof heldBackType>;

const jobResult = z.object({
  data: z.unknown().optional(),
  outputs: z.record(z.string(), z.string()).optional(),
  // Optional: a worker of an earlier version sends only `outputs`.
  outputFiles: z
    .record(
      z.string(),
      z.object({
        location: z.string(),
        bytes: z.number().int().min(0).optional(),
        sha256: z
          .string()
          .regex(/^[0-9a-f]{64}$/)
          .optional(),
      }),
    )
    .optional(),
});

export const controlRequest = z.discriminatedUnion('op', [
  z.object({
    op: z.literal('lease'),
    jobId: z.string().min(1),
    attempt: z.number().int().min(1),
    tenant: z.string().min(1),
    worker: z.string().min(1),
    secret: workerSecret,
  }),
  z.object({
    op: z.literal('heartbeat'),
    worker: z.string().min(1),
    secret: workerSecret,
    jobTypes: z.array(z.string()),
    capabilities: z.array(z.string()),
    // Optional: a worker of an earlier version sends none.
    heldBack: z.array(heldBackType).optional(),
    slots: z.number().int().min(0),
    leases: z.array(leaseRef.extend({ tenant: z.string().min(1) })),
  }),
  leaseRef.extend({
    op: z.literal('fence'),
    tenant: z.string().min(1),
    // The files the worker is about to store (optional: a worker of an earlier version sends
    // none). An orchestrator with an object store answers a live fence with an upload URL for each.
    outputs: z
      .array(z.object({ name: z.string().max(1024), bytes: z.number().int().min(0) }))
      .max(1000)
      .optional(),
  }),
  // Presigned GETs for the `s3://` inputs of a live lease, under its own tenant's keys only.
  leaseRef.extend({
    op: z.literal('inputs'),
    tenant: z.string().min(1),
    locations: z.array(z.string().min(1).max(2048)).min(1).max(100),
  }),
  // A multipart upload the fence answer allowed is over: the worker hands the parts' ETags
  // back, and the orchestrator completes the object only while the lease is still live.
  leaseRef.extend({
    op: z.literal('complete_upload'),
    tenant: z.string().min(1),
    name: z.string().max(1024),
    uploadId: z.string().min(1).max(1024),
    parts: z
      .array(z.object({ partNumber: z.number().int().min(1).max(maxUploadParts), etag: z.string().min(1).max(256) }))
      .min(1)
      .max(maxUploadParts),
  }),
  // Fresh URLs for the parts of a multipart upload still to go, before the ones the fence gave
  // expire: signed only while the lease is live, so a long upload lasts as long as its lease.
  leaseRef.extend({
    op: z.literal('renew_upload'),
    tenant: z.string().min(1),
    name: z.string().max(1024),
    uploadId: z.string().min(1).max(1024),
    parts: z
      .array(z.object({ partNumber: z.number().int().min(1).max(maxUploadParts), start: z.number().int().min(0), end: z.number().int().min(0) }))
      .min(1)
      .max(maxUploadParts),
  }),
  leaseRef.extend({
    op: z.literal('progress'),
    tenant: z.string().min(1),
    fraction: z.number().min(0).max(1),
    message: z.string().optional(),
  }),
  // Lines the job printed (or ctx.log), a batch at a time, for a live lease only; `dropped`
  // counts what the worker left out before them (printed faster than it could send).
  leaseRef.extend({
    op: z.literal('logs'),
    tenant: z.string().min(1),
    lines: z.array(logEntry).max(maxLogLinesPerRequest),
    dropped: z.object({ bytes: z.number().int().min(0), lines: z.number().int().min(0) }).optional(),
  }),
  leaseRef.extend({
    op: z.literal('settle'),
    tenant: z.string().min(1),
    outcome: z.discriminatedUnion('kind', [
      z.object({ kind: z.literal('finished'), result: jobResult }),
      z.object({ kind: z.literal('failed'), error: serializedError }),
    ]),
  }),
  // A worker hands back a lease it will not finish (a Fatal error, or it is stopping).
  leaseRef.extend({ op: z.literal('release'), tenant: z.string().min(1), error: serializedError }),
]);
export type ControlRequest = z.infer<typeof controlRequest>;
export type ControlOp = ControlRequest['op'];

/**
 * What each operation answers. `ttlMs` lets a worker compute its own deadline from its own
 * clock. Refusals carry the ledger's own codes (GrantRefusal, LeaseLoss), which the worker
 * reports in its events as they came.
 */
export type LeaseReply =
  | {
      op: 'lease';
      jobId: string;
      attempt: number;
      granted: true;
      token: string;
      ttlMs: number;
      input: unknown;
      requires: string[];
      /** How long one run may take, as the submission said; absent: the job type's or the worker's default. */
      timeoutSeconds?: number;
      /** Resource limits of one run, as the submission said; the worker enforces the lower of these and the job type's. */
      limits?: JobLimits;
      /** `presigned`: the orchestrator has an object store; outputs go only where a live fence answer says (see FenceReply). */
      store?: 'presigned';
    }
  | { op: 'lease'; jobId: string; attempt: number; granted: false; reason: GrantRefusal };

export interface HeartbeatReply {
  op: 'heartbeat';
  ttlMs: number;
  renewed: Array<{ jobId: string; attempt: number }>;
  lost: Array<{ jobId: string; attempt: number; reason: LeaseLoss }>;
}

/** One part of a multipart upload: a presigned UploadPart URL for the file's bytes `start`..`end` (inclusive). */
export interface PresignedPart {
  partNumber: number;
  url: string;
  start: number;
  end: number;
}

/**
 * Where one output goes, as a live fence answer says: a presigned PUT URL for the whole
 * file, or, for a file larger than the store's part size, a multipart upload the
 * orchestrator created, with a presigned URL per part. Either way `location` is what the
 * result names (`s3://bucket/key`). `validForMs` says how long the part URLs work from when
 * the answer left (the lease's deadline plus the grace): a worker whose upload runs longer
 * asks `renew_upload` for the parts still to go.
 */
export type PresignedUpload =
  | { name: string; location: string; url: string }
  | { name: string; location: string; multipart: { uploadId: string; parts: PresignedPart[]; validForMs: number } };

/**
 * A live fence is the permission to store outputs. With an object store it carries one
 * upload per output the request named (for `<prefix>/<tenant>/<job>/<attempt>/<name>`,
 * valid until shortly after the lease's deadline), or, if a name is not acceptable as a
 * key, `invalidOutput` and no URL at all. A refused fence carries nothing.
 */
export type FenceReply =
  | {
      op: 'fence';
      jobId: string;
      attempt: number;
      live: true;
      ttlMs: number;
      uploads?: PresignedUpload[];
      invalidOutput?: string;
    }
  | { op: 'fence'; jobId: string; attempt: number; live: false; reason: LeaseLoss };

/**
 * A live lease's `s3://` inputs: one presigned GET per location asked for (valid until
 * shortly after the lease's deadline), or, if any location is not the job's tenant's to
 * read (another tenant's key, another bucket, an orchestrator without an object store),
 * `refused` naming it and no URL at all. A lease no longer live gets nothing.
 */
export type InputsReply =
  | {
      op: 'inputs';
      jobId: string;
      attempt: number;
      live: true;
      downloads?: Array<{ location: string; url: string }>;
      refused?: string;
    }
  | { op: 'inputs'; jobId: string; attempt: number; live: false; reason: LeaseLoss };

/**
 * The answer to `complete_upload`. Live: the object is complete (or, with `storeError`, the
 * store refused to complete it). Not live: the lease is no longer this attempt's, the
 * multipart upload was aborted, and the worker gives up the attempt as after a refused fence.
 */
export type CompleteUploadReply =
  | { op: 'complete_upload'; jobId: string; attempt: number; live: true; storeError?: string }
  | { op: 'complete_upload'; jobId: string; attempt: number; live: false; reason: LeaseLoss };

/** The answer to `renew_upload`: fresh URLs for the parts asked, while the lease is live; else, as for complete_upload, the upload was aborted. */
export type RenewUploadReply =
  | { op: 'renew_upload'; jobId: string; attempt: number; live: true; parts: PresignedPart[]; validForMs: number }
  | { op: 'renew_upload'; jobId: string; attempt: number; live: false; reason: LeaseLoss };

export type ProgressReply =
  { op: 'progress'; jobId: string; attempt: number; accepted: true } | { op: 'progress'; jobId: string; attempt: number; accepted: false; reason: LeaseLoss };

export type LogsReply =
  { op: 'logs'; jobId: string; attempt: number; accepted: true } | { op: 'logs'; jobId: string; attempt: number; accepted: false; reason: LeaseLoss };

export type SettleReply =
  | { op: 'settle'; jobId: string; attempt: number; accepted: true; state: string; transition: Extract<SettleResult, { accepted: true }>['transition'] }
  | { op: 'settle'; jobId: string; attempt: number; accepted: false; reason: LeaseLoss };

export type ReleaseReply =
  | { op: 'release'; jobId: string; attempt: number; accepted: true; state: string; transition: Extract<ReleaseResult, { accepted: true }>['transition'] }
  | { op: 'release'; jobId: string; attempt: number; accepted: false; reason: LeaseLoss };

export type ControlReply =
  LeaseReply | HeartbeatReply | FenceReply | InputsReply | CompleteUploadReply | RenewUploadReply | ProgressReply | LogsReply | SettleReply | ReleaseReply;

/** A request the orchestrator could not process at all (as opposed to a refusal). */
export interface ControlFailure {
  op: 'error';
  code: ControlErrorCode;
  message: string;
}

export const ControlErrorCode = {
  /** The request did not match the protocol; retrying it will not help. */
  invalidRequest: 'invalid_request',
  /** The ledger could not answer (storage failure); retrying later may. */
  ledgerUnavailable: 'ledger_unavailable',
  /** The message did not carry the fleet key the orchestrator was given: it is not from one of its workers. */
  unauthorized: 'unauthorized',
  /** The orchestrator's object store could not be reached, or refused it (starting a multipart upload, aborting one); retrying later may help. */
  storeUnavailable: 'store_unavailable',
  /** A heartbeat named a live worker of the fleet, without that worker process's secret. */
  workerConflict: 'worker_conflict',
} as const;
export type ControlErrorCode = (typeof ControlErrorCode)[keyof typeof ControlErrorCode];

export type ControlAnswer = ControlReply | ControlFailure;

/** Most requests in one batch message. */
export const maxControlBatch = 128;

/** Several requests in one message; each is validated and answered on its own. */
export const controlBatch = z.object({
  op: z.literal('batch'),
  requests: z.array(z.unknown()).min(1).max(maxControlBatch),
});

export interface ControlBatchReply {
  op: 'batch';
  /** One per request, in the order of the requests. */
  answers: ControlAnswer[];
}

/**
 * The header carrying the fleet key: a credential the orchestrator and its workers share
 * (`PLANRUN_FLEET_KEY`). When the orchestrator has one, a control message without it is
 * answered `unauthorized` and changes nothing.
 */
export const fleetKeyHeader = 'planrun-fleet-key';

export function isBatchMessage(value: unknown): boolean {
  return typeof value === 'object' && value !== null && (value as { op?: unknown }).op === 'batch';
}

export function encode(value: unknown): Buffer {
  return Buffer.from(JSON.stringify(value));
}

export function decode(body: Buffer): unknown {
  return JSON.parse(body.toString('utf8')) as unknown;
}
