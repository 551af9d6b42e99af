import { rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { PermanentError, TransientError } from '../core/errors.js';
import { defineJobType, type JobContext, type JobRunResult } from '../worker/runner/job-type.js';
import { locateFfmpeg } from './ffmpeg.js';
import { DEFAULT_GENERATED_SECONDS, parseTranscodeInput, type Rendition, type TranscodeInput } from './transcode-input.js';
import { classifyFfmpegFailure, fileArgument, ffmpegMissing, probeMedia, runFfmpeg, type MediaInfo } from './transcode-process.js';

/**
 * `transcode`: makes renditions of a video with real FFmpeg, one output file each, with
 * progress read from FFmpeg. Needs the `ffmpeg` capability.
 *
 * FFmpeg is found by `locateFfmpeg()` (./ffmpeg.ts), first match wins: the binary of the
 * optional npm dependency `@ffmpeg-installer/ffmpeg`, then `ffmpeg` on PATH, then the path
 * in `PLANRUN_FFMPEG`. A worker should offer `ffmpeg` only when that finds one.
 *
 * Input, all optional (`{}` renders a generated test clip in the default renditions):
 * - `source`: the video to transcode: an `s3://` URL (of the tenant's own uploads or
 *   outputs, read through the orchestrator's presigned GET), an `https://` or `http://` URL,
 *   which the worker fetches into the job's scratch folder before the run (`inputFiles`,
 *   see docs/storage.md), or, on one machine, a file path (relative to the worker's
 *   directory) or `file:` URL. Absent: a generated test clip (FFmpeg's `testsrc` pattern with a 440 Hz
 *   `sine` tone, 25 fps, 16:9 at the tallest rendition's height).
 * - `durationSeconds` (> 0, <= 3600): the generated clip's length (default 5), or, with a
 *   `source`, how much of it to render (default all).
 * - `renditions`: 1 to 8 of `{ name, height, videoBitrate?, format? }`; default 240p and
 *   144p mp4. `name` names the output file `<name>.<format>` (letters, digits, `-`, `_`);
 *   `height` is an even number of pixels (the width follows the aspect ratio, rounded to
 *   even); `videoBitrate` is bits/s as a number or a string like `"400k"` (absent:
 *   constant quality); `format` is `"mp4"` (H.264 + AAC, the default) or `"webm"` (VP9 +
 *   Opus).
 * - `filter`: an FFmpeg filter chain applied before scaling (`-vf "<filter>,scale=..."`).
 *   It is handed to FFmpeg as is, and some FFmpeg filters read or write files (`movie`,
 *   `stats_file=` ...): accept it only from users you would let run FFmpeg.
 *
 * Result: `outputs` lists `<name>.<format>` for each rendition in order; `data` is
 * `{ source, durationSeconds, renditions: [{ name, file, format, width, height, bytes,
 * durationSeconds, videoBitrate? }] }` with `source` the source's path or
 * `"generated test clip"` and sizes measured on the written files.
 *
 * Progress: each rendition gets an equal share, reported as `rendition <name> (i of n)`;
 * within one, FFmpeg's output position (`-progress pipe:1`) against the duration to render
 * (the generated clip's, or the source's as FFmpeg reads it from the container; a source
 * with no known duration reports progress per rendition only). Ends at 1.
 *
 * Abort: when `ctx.signal` aborts, the running FFmpeg is killed (SIGKILL), waited for, its
 * partial output removed, and the signal's reason thrown. FFmpeg also dies with the job
 * process, even one killed with SIGKILL (see runFfmpeg).
 *
 * Errors:
 * - a `source` URL that cannot be fetched fails before the run, as the worker says:
 *   permanent `input_missing`, `input_too_large`, `input_refused`; transient `input_unreachable`;
 * - permanent `invalid_input`: the input breaks the rules above (the message names the
 *   field), or the source file does not exist, is not a regular file or has no video stream;
 * - permanent `ffmpeg_rejected`: FFmpeg exited non-zero on its own, e.g. a filter it does
 *   not know or cannot parse ("No such filter", "Invalid argument", "Error parsing
 *   filterchain"), a source it cannot decode, an encoder it lacks; the message carries its
 *   complaint (its last error lines). FFmpeg fails the same way on the same input again;
 * - transient `ffmpeg_killed`: FFmpeg was killed by a signal that was not ours (the OOM
 *   killer, an operator); `disk_full` (ENOSPC, quota) and `ffmpeg_io_error` (EIO, ENOMEM,
 *   EMFILE ...): the system's trouble, not the job's; `source_unreadable`: the source
 *   could not be examined (a permission or I/O error); `ffmpeg_spawn_failed`: starting
 *   FFmpeg failed for a reason other than its absence;
 * - fatal `ffmpeg_missing`: no FFmpeg at run time, or the one found cannot be executed. A
 *   worker that offers `ffmpeg` without having it is broken, and every transcode it took
 *   would fail: it must stop and restart clean (and then not offer the capability).
 */
export const TRANSCODE_OUTPUT_RESERVE_BYTES = 256 * 1024 * 1024;

export interface TranscodeOptions {
  /** Finds FFmpeg at the start of each run; locateFfmpeg() by default. */
  locate?: () => string | undefined;
}

export function makeTranscodeJobType(options: TranscodeOptions = {}) {
  const locate = options.locate ?? (() => locateFfmpeg());
  return defineJobType({
    name: 'transcode',
    requires: ['ffmpeg'],
    // The operator's choice of FFmpeg, read where the job runs (locateFfmpeg).
    env: ['PLANRUN_FFMPEG'],
    outputReserveBytes: TRANSCODE_OUTPUT_RESERVE_BYTES,
    inputFiles: ['source'],
    run: (ctx: JobContext) => runTranscode(ctx, locate),
  });
}

export const transcode = makeTranscodeJobType();

export const GENERATED_SOURCE = 'generated test clip';
const GENERATED_FPS = 25;
const TONE_HZ = 440;

interface RenditionInfo {
  name: string;
  file: string;
  format: Rendition['format'];
  width: number;
  height: number;
  bytes: number;
  durationSeconds: number | null;
  videoBitrate?: number;
}

/** How each FFmpeg run reads the source. */
interface SourcePlan {
  label: string;
  inputArgs: string[];
  /** Seconds to render, when known: progress is measured against it. */
  durationSeconds?: number;
}

async function runTranscode(ctx: JobContext, locate: () => string | undefined): Promise<JobRunResult> {
  const input = parseTranscodeInput(ctx.input);
  ctx.signal.throwIfAborted();
  const ffmpeg = locate();
  if (ffmpeg === undefined) throw ffmpegMissing('none was found');

  const source = input.source === undefined ? generatedSource(input) : await fileSource(ffmpeg, input.source, input, ctx.signal);
  const progress = progressReporter(ctx);
  const count = input.renditions.length;
  const renditions: RenditionInfo[] = [];
  for (const [index, rendition] of input.renditions.entries()) {
    const message = `rendition ${rendition.name} (${index + 1} of ${count})`;
    progress(index / count, message);
    const onProgress = (seconds: number): void => {
      if (source.durationSeconds !== undefined) progress((index + Math.min(1, seconds / source.durationSeconds)) / count, message);
    };
    renditions.push(await render(ffmpeg, ctx, source, rendition, input.filter, onProgress));
    progress((index + 1) / count, message);
  }
  return {
    data: { source: source.label, durationSeconds: source.durationSeconds ?? null, renditions },
    outputs: renditions.map((rendition) => rendition.file),
  };
}

/** Reports only forward moves (or a new message at the same point), so progress never goes back. */
function progressReporter(ctx: JobContext): (fraction: number, message: string) => void {
  let lastFraction = -1;
  let lastMessage: string | undefined;
  return (fraction, message) => {
    const clamped = Math.min(1, Math.max(0, fraction));
    if (clamped < lastFraction || (clamped === lastFraction && message === lastMessage)) return;
    lastFraction = clamped;
    lastMessage = message;
    ctx.progress(clamped, message);
  };
}

function generatedSource(input: TranscodeInput): SourcePlan {
  const seconds = input.durationSeconds ?? DEFAULT_GENERATED_SECONDS;
  const height = Math.max(...input.renditions.map((rendition) => rendition.height));
  const width = 2 * Math.round((height * 16) / 9 / 2);
  return {
    label: GENERATED_SOURCE,
    durationSeconds: seconds,
    inputArgs: [
      '-f',
      'lavfi',
      '-i',
      `testsrc=size=${width}x${height}:rate=${GENERATED_FPS}:duration=${seconds}`,
      '-f',
      'lavfi',
      '-i',
      `sine=frequency=${TONE_HZ}:sample_rate=48000:duration=${seconds}`,
      '-map',
      '0:v:0',
      '-map',
      '1:a:0',
    ],
  };
}

async function fileSource(ffmpeg: string, file: string, input: TranscodeInput, signal: AbortSignal): Promise<SourcePlan> {
  const isFile = await stat(file).then(
    (stats) => stats.isFile(),
    (error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT' || error.code === 'ENOTDIR') {
        throw new PermanentError('invalid_input', `transcode: source ${file} does not exist`);
      }
      throw new TransientError('source_unreadable', `transcode: cannot examine source ${file}: ${error.message}`);
    },
  );
  if (!isFile) throw new PermanentError('invalid_input', `transcode: source ${file} is not a regular file`);
  const info: MediaInfo = await probeMedia(ffmpeg, file, signal, `source ${file}`);
  if (info.width === undefined) throw new PermanentError('invalid_input', `transcode: source ${file} has no video stream`);
  const limit = input.durationSeconds;
  const known = info.durationSeconds;
  return {
    label: file,
    durationSeconds: limit === undefined ? known : known === undefined ? limit : Math.min(limit, known),
    inputArgs: ['-i', fileArgument(file), '-map', '0:v:0', '-map', '0:a:0?', ...(limit === undefined ? [] : ['-t', String(limit)])],
  };
}

async function render(
  ffmpeg: string,
  ctx: JobContext,
  source: SourcePlan,
  rendition: Rendition,
  filter: string | undefined,
  onProgress: (seconds: number) => void,
): Promise<RenditionInfo> {
  const file = `${rendition.name}.${rendition.format}`;
  const outputPath = path.resolve(ctx.scratchDir, file);
  const what = `rendition "${rendition.name}"`;
  const videoFilter = [filter, `scale=-2:${rendition.height}`, 'setsar=1'].filter((part) => part !== undefined).join(',');
  const args = [
    ...source.inputArgs,
    '-vf',
    videoFilter,
    ...codecArgs(rendition),
    '-f',
    rendition.format,
    '-progress',
    'pipe:1',
    '-nostats',
    '-y',
    fileArgument(outputPath),
  ];
  try {
    // In the job's log (planrun logs <id>): the exact command, to run by hand when a rendition looks wrong.
    ctx.log(`rendering ${what}: ffmpeg ${args.join(' ')}`, { rendition: rendition.name });
    const exit = await runFfmpeg({ ffmpeg, args, signal: ctx.signal, onProgress, cwd: ctx.scratchDir });
    if (exit.code !== 0 || exit.signal !== null) throw classifyFfmpegFailure(exit, what);
    const [{ size: bytes }, info] = await Promise.all([stat(outputPath), probeMedia(ffmpeg, outputPath, ctx.signal, `the output of ${what}`)]);
    if (info.width === undefined || info.height === undefined) {
      throw new TransientError('ffmpeg_bad_output', `transcode: FFmpeg finished ${what}, but its output ${file} has no video stream`);
    }
    ctx.log(`rendered ${what}: ${info.width}x${info.height}, ${bytes} bytes`, { rendition: rendition.name, bytes });
    return {
      name: rendition.name,
      file,
      format: rendition.format,
      width: info.width,
      height: info.height,
      bytes,
      durationSeconds: info.durationSeconds ?? null,
      ...(rendition.videoBitrate === undefined ? {} : { videoBitrate: rendition.videoBitrate }),
    };
  } catch (error) {
    await rm(outputPath, { force: true }).catch(() => {});
    throw error;
  }
}

function codecArgs(rendition: Rendition): string[] {
  const bitrate = rendition.videoBitrate;
  if (rendition.format === 'webm') {
    return [
      '-c:v',
      'libvpx-vp9',
      '-deadline',
      'realtime',
      '-cpu-used',
      '8',
      '-row-mt',
      '1',
      '-pix_fmt',
      'yuv420p',
      ...(bitrate === undefined ? ['-crf', '33', '-b:v', '0'] : ['-b:v', String(bitrate)]),
      '-c:a',
      'libopus',
      '-b:a',
      '96k',
    ];
  }
  return [
    '-c:v',
    'libx264',
    '-preset',
    'veryfast',
    '-pix_fmt',
    'yuv420p',
    ...(bitrate === undefined ? ['-crf', '23'] : ['-b:v', String(bitrate), '-maxrate', String(bitrate), '-bufsize', String(2 * bitrate)]),
    '-c:a',
    'aac',
    '-b:a',
    '96k',
    '-movflags',
    '+faststart',
  ];
}
