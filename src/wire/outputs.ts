/**
 * How a result describes its outputs. `result.outputs` keeps the contract's plain form
 * (name -> where: a path for the folder store, `s3://bucket/key` for the S3 store), which
 * outside readers take as a string; `result.outputFiles` names the same outputs with what a
 * reader needs to check them: `{ location, bytes, sha256 }`, the location as a URL
 * (`file://` for the folder store).
 */
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { JobResult } from './jobs.js';
import type { RequiredKeys, SchemaProperties } from './schema.js';

/** One stored output, as a result names it in `outputFiles`. */
export interface OutputFile {
  /** `s3://bucket/key` for the S3 store, a `file://` URL for the folder store. */
  location: string;
  /** Its size. Absent only for a result stored before planrun recorded it. */
  bytes?: number;
  /** Hex sha256 of its bytes, computed while it was stored. Absent only for a result stored before planrun recorded it. */
  sha256?: string;
}

/** What an output store answers for each file it stored. */
export type StoredFile = Required<OutputFile>;

const outputFileProperties = {
  location: { type: 'string', description: 's3://bucket/key, or a file:// URL for the folder store' },
  bytes: { type: 'integer', description: 'its size (absent for a result stored before it was recorded)' },
  sha256: { type: 'string', description: 'hex sha256 of its bytes (absent for a result stored before it was recorded)' },
} as const satisfies SchemaProperties<OutputFile>;

const outputFileRequired = ['location'] as const satisfies ReadonlyArray<RequiredKeys<OutputFile>>;

export const outputFileSchema = { type: 'object', required: outputFileRequired, properties: outputFileProperties } as const;

/** The location as a URL: a folder-store path becomes `file://`; a URL stays as it is. */
export function locationUrl(location: string): string {
  return location.startsWith('/') ? pathToFileURL(location).href : location;
}

/** The location as `result.outputs` names it: a `file://` URL becomes its path; any other stays as it is. */
export function plainLocation(location: string): string {
  return location.startsWith('file:') ? fileURLToPath(location) : location;
}

/** `result.outputs` for the files a store answered. */
export function plainLocations(files: Readonly<Record<string, OutputFile>>): Record<string, string> {
  return Object.fromEntries(Object.entries(files).map(([name, file]) => [name, plainLocation(file.location)]));
}

/**
 * A stored result as readers get it: one stored before `outputFiles` existed gains the
 * entries its `outputs` imply (location only: its size and digest were never recorded).
 */
export function withOutputFiles<R extends JobResult | null>(result: R): R {
  if (result === null || result.outputFiles !== undefined || result.outputs === undefined) return result;
  const outputFiles = Object.fromEntries(Object.entries(result.outputs).map(([name, location]) => [name, { location: locationUrl(location) }]));
  return { ...result, outputFiles };
}
