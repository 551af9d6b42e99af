import { createHash } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { PermanentError } from '../core/errors.js';
import { defineJobType } from '../worker/runner/job-type.js';

/**
 * `checksum`: hashes its input with SHA-256 and writes the digest as an output file in
 * the format of `sha256sum` (`<hex>  -`), the smallest job type with a real output.
 *
 * Input: `{ text: string }` (hashed as UTF-8) or `{ bytes: string }` (base64).
 * Result: `{ data: { sha256, size }, outputs: ['checksum.sha256'] }`, `size` in bytes.
 * Any other input fails permanently with code `invalid_input`.
 */
export const CHECKSUM_OUTPUT_FILE = 'checksum.sha256';

const BASE64_PATTERN = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

export const checksum = defineJobType({
  name: 'checksum',
  async run(ctx) {
    const content = parseInput(ctx.input);
    const sha256 = createHash('sha256').update(content).digest('hex');
    await writeFile(path.join(ctx.scratchDir, CHECKSUM_OUTPUT_FILE), `${sha256}  -\n`);
    ctx.progress(1);
    return { data: { sha256, size: content.length }, outputs: [CHECKSUM_OUTPUT_FILE] };
  },
});

function parseInput(input: unknown): Buffer {
  const fields = typeof input === 'object' && input !== null ? (input as Record<string, unknown>) : {};
  const { text, bytes } = fields;
  if (typeof text === 'string' && bytes === undefined) return Buffer.from(text, 'utf8');
  if (typeof bytes === 'string' && text === undefined && BASE64_PATTERN.test(bytes)) return Buffer.from(bytes, 'base64');
  throw new PermanentError('invalid_input', 'checksum: the input must be { text: string } or { bytes: string } (base64)');
}
