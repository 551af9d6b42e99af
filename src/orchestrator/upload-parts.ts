import { maxUploadParts } from '../control/protocol.js';

const MiB = 1024 * 1024;

/** An output larger than this goes up in parts, by default. */
export const defaultPartSize = 64 * MiB;
/** S3's smallest part (every part but the last). */
export const minPartSize = 5 * MiB;
/** S3's largest part, and its largest single PUT. */
export const maxPartSize = 5 * 1024 * MiB;

/** The configured part size, if S3 accepts it; else an error saying the bounds. */
export function checkedPartSize(partSize: number): number {
  if (!Number.isInteger(partSize) || partSize < minPartSize || partSize > maxPartSize) {
    throw new RangeError(`the store's part size must be between 5 MiB and 5 GiB (S3's limits), not ${partSize} bytes`);
  }
  return partSize;
}

/**
 * How a file of `bytes` bytes is cut into the parts of a multipart upload: parts of
 * `partSize`, grown (to a whole MiB) when the file would otherwise need more than S3's
 * 10,000 parts. `start` and `end` are inclusive byte offsets, as createReadStream takes them.
 */
export function planParts(bytes: number, partSize: number): Array<{ partNumber: number; start: number; end: number }> {
  const size = Math.max(partSize, Math.ceil(bytes / maxUploadParts / MiB) * MiB);
  const parts: Array<{ partNumber: number; start: number; end: number }> = [];
  for (let start = 0, partNumber = 1; start < bytes; start += size, partNumber++) {
    parts.push({ partNumber, start, end: Math.min(start + size, bytes) - 1 });
  }
  return parts;
}
