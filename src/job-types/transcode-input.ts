import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PermanentError } from '../core/errors.js';

export const FORMATS = ['mp4', 'webm'] as const;
export type Format = (typeof FORMATS)[number];

export interface Rendition {
  name: string;
  height: number;
  /** Bits per second; absent: constant quality. */
  videoBitrate?: number;
  format: Format;
}

export interface TranscodeInput {
  /** Absolute path of the source video; absent: a generated test clip. */
  source?: string;
  /** How many seconds to render: the generated clip's length, or a limit on the source's. */
  durationSeconds?: number;
  renditions: Rendition[];
  filter?: string;
}

export const DEFAULT_GENERATED_SECONDS = 5;
export const MAX_DURATION_SECONDS = 3600;
export const MAX_RENDITIONS = 8;
export const MIN_HEIGHT = 16;
export const MAX_HEIGHT = 4320;
export const MIN_BITRATE = 10_000;
export const MAX_BITRATE = 200_000_000;
export const MAX_FILTER_LENGTH = 4000;

export const DEFAULT_RENDITIONS: readonly Rendition[] = [
  { name: '240p', height: 240, format: 'mp4' },
  { name: '144p', height: 144, format: 'mp4' },
];

const INPUT_FIELDS = ['source', 'durationSeconds', 'renditions', 'filter'];
const RENDITION_FIELDS = ['name', 'height', 'videoBitrate', 'format'];
// Rendition names become file names (`<name>.<format>`): nothing that could leave the folder.
const RENDITION_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
const BITRATE = /^(\d+(?:\.\d+)?)([kKmM]?)$/;

/**
 * Checks a transcode input and fills in its defaults. Anything wrong is a permanent
 * `invalid_input` naming the field. Relative source paths resolve against the current
 * directory (the worker's).
 */
export function parseTranscodeInput(input: unknown): TranscodeInput {
  if (input === undefined || input === null) input = {};
  if (typeof input !== 'object' || Array.isArray(input)) {
    throw invalid('the input must be an object { source?, durationSeconds?, renditions?, filter? }');
  }
  const fields = input as Record<string, unknown>;
  rejectUnknownFields(fields, INPUT_FIELDS, 'the input');

  const parsed: TranscodeInput = { renditions: parseRenditions(fields.renditions) };
  if (fields.source !== undefined) parsed.source = parseSource(fields.source);
  if (fields.durationSeconds !== undefined) {
    const seconds = fields.durationSeconds;
    if (typeof seconds !== 'number' || !Number.isFinite(seconds) || seconds <= 0 || seconds > MAX_DURATION_SECONDS) {
      throw invalid(`durationSeconds must be a number of seconds > 0 and <= ${MAX_DURATION_SECONDS}`);
    }
    parsed.durationSeconds = seconds;
  }
  if (fields.filter !== undefined) {
    const filter = fields.filter;
    if (typeof filter !== 'string' || filter.trim() === '' || filter.length > MAX_FILTER_LENGTH) {
      throw invalid(`filter must be a non-empty string of at most ${MAX_FILTER_LENGTH} characters (an FFmpeg filter chain)`);
    }
    // One -vf argument with no shell in between: newlines and NULs have no business there.
    if (/[\0\r\n]/.test(filter)) throw invalid('filter must be on one line');
    parsed.filter = filter.trim();
  }
  return parsed;
}

function parseSource(source: unknown): string {
  if (typeof source !== 'string' || source.trim() === '') {
    throw invalid('source must be a non-empty string: a file path or a file: URL');
  }
  if (source.includes('\0')) throw invalid('source must not contain NUL characters');
  if (/^file:/i.test(source)) {
    try {
      return fileURLToPath(source);
    } catch (error) {
      throw invalid(`source ${JSON.stringify(source)} is not a valid file: URL (${(error as Error).message})`);
    }
  }
  // The worker fetched an `s3:`, `https:` or `http:` source before the run and hands over
  // its local path (the type's inputFiles). FFmpeg would read `pipe:`, `concat:`, `ftp:` ...
  // itself; only local files are taken.
  if (/^[a-z][a-z0-9+.-]+:/i.test(source)) {
    throw invalid(`source ${JSON.stringify(source)} must be a file path or a file: URL, not another kind of URL`);
  }
  return path.resolve(source);
}

function parseRenditions(value: unknown): Rendition[] {
  if (value === undefined) return DEFAULT_RENDITIONS.map((rendition) => ({ ...rendition }));
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_RENDITIONS) {
    throw invalid(`renditions must be a list of 1 to ${MAX_RENDITIONS} renditions { name, height, videoBitrate?, format? }`);
  }
  const names = new Set<string>();
  return value.map((entry: unknown, index) => {
    const label = `renditions[${index}]`;
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) {
      throw invalid(`${label} must be an object { name, height, videoBitrate?, format? }`);
    }
    const fields = entry as Record<string, unknown>;
    rejectUnknownFields(fields, RENDITION_FIELDS, label);
    const { name, height, videoBitrate, format = 'mp4' } = fields;
    if (typeof name !== 'string' || !RENDITION_NAME.test(name)) {
      throw invalid(`${label}.name must be 1 to 64 letters, digits, "-" or "_", starting with a letter or digit (it names the output file)`);
    }
    if (names.has(name)) throw invalid(`${label}.name "${name}" is used by another rendition`);
    names.add(name);
    if (!Number.isSafeInteger(height) || (height as number) < MIN_HEIGHT || (height as number) > MAX_HEIGHT || (height as number) % 2 !== 0) {
      throw invalid(`${label}.height must be an even whole number of pixels from ${MIN_HEIGHT} to ${MAX_HEIGHT}`);
    }
    if (!FORMATS.includes(format as Format)) {
      throw invalid(`${label}.format must be one of ${FORMATS.map((f) => `"${f}"`).join(', ')}`);
    }
    const rendition: Rendition = { name, height: height as number, format: format as Format };
    if (videoBitrate !== undefined) rendition.videoBitrate = parseBitrate(videoBitrate, `${label}.videoBitrate`);
    return rendition;
  });
}

/** A number of bits per second, or a string like "400k" or "1.5M". */
function parseBitrate(value: unknown, label: string): number {
  let bits: number | undefined;
  if (typeof value === 'number' && Number.isFinite(value)) bits = Math.round(value);
  else if (typeof value === 'string') {
    const match = BITRATE.exec(value.trim());
    if (match) {
      const unit = (match[2] ?? '').toLowerCase();
      bits = Math.round(Number(match[1]) * (unit === 'k' ? 1e3 : unit === 'm' ? 1e6 : 1));
    }
  }
  if (bits === undefined || bits < MIN_BITRATE || bits > MAX_BITRATE) {
    throw invalid(`${label} must be bits per second from ${MIN_BITRATE} to ${MAX_BITRATE}, as a number or a string like "400k" or "1.5M"`);
  }
  return bits;
}

function rejectUnknownFields(fields: Record<string, unknown>, known: string[], label: string): void {
  for (const key of Object.keys(fields)) {
    if (!known.includes(key)) {
      throw invalid(`${label} has an unknown field "${key}" (it takes ${known.join(', ')})`);
    }
  }
}

function invalid(message: string): PermanentError {
  return new PermanentError('invalid_input', `transcode: ${message}`);
}
