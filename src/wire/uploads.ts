/**
 * The wire shape of an upload, declared once: what `POST /v1/uploads` takes and answers
 * (serialised through the schemas here) and what the client types it as.
 */
import { allRequired, timeSchema, type SchemaProperties } from './schema.js';

/** The largest file one presigned PUT takes (the S3 limit on a single PUT). */
export const maxUploadBytes = 5 * 1024 ** 3;

/** What `POST /v1/uploads` takes: the file's name (no folder) and its exact size. */
export interface UploadRequest {
  name: string;
  bytes: number;
  /** The tenant the file is for: required with an admin key, refused with a tenant key. */
  tenant?: string;
}

/** Where to PUT the file, and the location to name in a job's input once it is there. */
export interface UploadGrant {
  /** `s3://bucket/<prefix>/<tenant>/uploads/<id>/<name>`: what a job's input names. */
  location: string;
  /** A presigned PUT URL; send exactly `bytes` bytes (Content-Length is signed), without the API key. */
  url: string;
  /** When `url` stops working (an upload started before then runs to its end). */
  expiresAt: string;
}

const uploadRequestProperties = {
  name: {
    type: 'string',
    minLength: 1,
    maxLength: 255,
    // One plain file name: no folder, no `.` or `..`, no control character.
    pattern: '^(?!\\.{1,2}$)[^/\\\\\\u0000-\\u001f\\u007f]+$',
    description: 'the file name, without any folder',
  },
  bytes: { type: 'integer', minimum: 0, maximum: maxUploadBytes, description: 'the exact size of the file' },
  tenant: { type: 'string', minLength: 1, maxLength: 64, description: 'the tenant the file is for: required with an admin key, refused with a tenant key' },
} as const satisfies SchemaProperties<UploadRequest>;

export const uploadRequestSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'bytes'],
  properties: uploadRequestProperties,
} as const;

const uploadGrantProperties = {
  location: { type: 'string', description: 'what a job input names: s3://bucket/<prefix>/<tenant>/uploads/<id>/<name>' },
  url: { type: 'string', description: 'a presigned PUT URL: send exactly `bytes` bytes, without the API key' },
  expiresAt: timeSchema,
} as const satisfies SchemaProperties<UploadGrant>;

export const uploadGrantSchema = { type: 'object', required: allRequired(uploadGrantProperties), properties: uploadGrantProperties } as const;
