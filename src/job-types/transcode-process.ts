import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { FatalError, PermanentError, TransientError, type JobError } from '../core/errors.js';
import { FFMPEG_SEARCH_ORDER, isExecutableFile } from './ffmpeg.js';

/**
 * Running one FFmpeg process for the transcode job type: spawning it so that it never
 * outlives the job, reading its progress and its complaints, and classifying how it failed.
 */

export interface StderrLine {
  /** FFmpeg's log level (`error`, `fatal`, `warning`, `info`, ...), from `-loglevel level+...`. */
  level: string;
  text: string;
}

export interface FfmpegExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** The last lines FFmpeg wrote to stderr (at most STDERR_TAIL_LINES). */
  stderr: StderrLine[];
}

export interface RunFfmpegOptions {
  ffmpeg: string;
  /** Arguments after the ones every run gets (`-hide_banner -nostdin -loglevel level+info`). */
  args: string[];
  signal: AbortSignal;
  /** Called with FFmpeg's output position, in seconds, each time it reports progress (`-progress pipe:1`). */
  onProgress?: (outTimeSeconds: number) => void;
  /** FFmpeg's working directory (where relative file names in a filter land); this process's by default. */
  cwd?: string;
}

const STDERR_TAIL_LINES = 200;
const MAX_LINE_CHARS = 2000;
const COMPLAINT_LINES = 8;
const MAX_COMPLAINT_CHARS = 1500;
const ERROR_LEVELS = new Set(['error', 'fatal', 'panic']);

/** The FFmpeg processes this process started and has not seen exit, killed if it exits first. */
const running = new Set<ChildProcess>();
let exitHookInstalled = false;

/**
 * Runs FFmpeg to the end and resolves with how it exited, whatever the exit code. Rejects
 * with the signal's reason when `signal` aborts (after FFmpeg, killed with SIGKILL, is
 * gone), and with a FatalError `ffmpeg_missing` when the binary is not there.
 *
 * FFmpeg does not die with its parent by itself (it ignores a closed progress pipe), so:
 * on Linux it is started through `setpriv --pdeathsig KILL` (util-linux), which makes the
 * kernel kill it when this process dies, even by SIGKILL; and everywhere, a still-running
 * FFmpeg is killed when this process exits normally.
 */
export async function runFfmpeg(options: RunFfmpegOptions): Promise<FfmpegExit> {
  const { ffmpeg, args, signal, onProgress, cwd } = options;
  signal.throwIfAborted();
  if (!isExecutableFile(ffmpeg)) throw ffmpegMissing(`${ffmpeg} is not an executable file any more`);

  const fullArgs = ['-hide_banner', '-nostdin', '-loglevel', 'level+info', ...args];
  const [command, commandArgs] = withParentDeathSignal(ffmpeg, fullArgs);
  return await new Promise<FfmpegExit>((resolve, reject) => {
    const child = spawn(command, commandArgs, { stdio: ['ignore', 'pipe', 'pipe'], windowsHide: true, ...(cwd === undefined ? {} : { cwd }) });
    track(child);
    let spawnError: Error | undefined;
    const stderr: StderrLine[] = [];

    const onAbort = (): void => void child.kill('SIGKILL');
    signal.addEventListener('abort', onAbort, { once: true });

    readLines(child.stdout, progressReader(onProgress));
    let lastLevel = 'info';
    readLines(child.stderr, (raw) => {
      const line = parseStderrLine(raw, lastLevel);
      if (line === undefined) return;
      lastLevel = line.level;
      stderr.push(line);
      if (stderr.length > STDERR_TAIL_LINES) stderr.shift();
    });

    child.once('error', (error) => {
      // Spawning failed (no 'close' follows when nothing started) or killing failed.
      spawnError ??= error;
      if (child.pid === undefined) finish(null, null);
    });
    child.once('close', (code, exitSignal) => finish(code, exitSignal));

    let finished = false;
    function finish(code: number | null, exitSignal: NodeJS.Signals | null): void {
      if (finished) return;
      finished = true;
      running.delete(child);
      signal.removeEventListener('abort', onAbort);
      if (signal.aborted) return reject(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
      if (spawnError !== undefined && child.pid === undefined) return reject(spawnFailure(ffmpeg, spawnError));
      resolve({ code, signal: exitSignal, stderr });
    }
  });
}

/** Starts with `setpriv --pdeathsig KILL --` where that works (Linux with util-linux 2.33 or later). */
function withParentDeathSignal(command: string, args: string[]): [string, string[]] {
  return setprivWorks() ? ['setpriv', ['--pdeathsig', 'KILL', '--', command, ...args]] : [command, args];
}

let setprivChecked: boolean | undefined;
function setprivWorks(): boolean {
  if (setprivChecked === undefined) {
    setprivChecked =
      process.platform === 'linux' && spawnSync('setpriv', ['--pdeathsig', 'KILL', '--', 'true'], { stdio: 'ignore', timeout: 5000 }).status === 0;
  }
  return setprivChecked;
}

function track(child: ChildProcess): void {
  running.add(child);
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const survivor of running) survivor.kill('SIGKILL');
  });
}

function readLines(stream: NodeJS.ReadableStream | null, onLine: (line: string) => void): void {
  if (stream === null) return;
  createInterface({ input: stream, crlfDelay: Infinity }).on('line', onLine);
}

/** `-progress` writes blocks of `key=value` lines, each ending with `progress=continue|end`. */
function progressReader(onProgress: ((seconds: number) => void) | undefined): (line: string) => void {
  let block: Record<string, string> = {};
  return (line) => {
    const equals = line.indexOf('=');
    if (equals < 0) return;
    const key = line.slice(0, equals).trim();
    const value = line.slice(equals + 1).trim();
    if (key !== 'progress') {
      block[key] = value;
      return;
    }
    const seconds = outTimeSeconds(block);
    block = {};
    if (seconds !== undefined) onProgress?.(seconds);
  };
}

/**
 * The output position of one progress block. `out_time_us` is in microseconds; so is the
 * older `out_time_ms`, despite its name (an FFmpeg quirk kept for compatibility).
 */
export function outTimeSeconds(block: Record<string, string>): number | undefined {
  for (const key of ['out_time_us', 'out_time_ms']) {
    const value = block[key];
    if (value !== undefined && /^-?\d+$/.test(value)) return Math.max(0, Number(value) / 1e6);
  }
  const clock = block.out_time === undefined ? undefined : parseClock(block.out_time);
  return clock === undefined ? undefined : Math.max(0, clock);
}

/** `HH:MM:SS(.fraction)`, possibly negative, in seconds. */
export function parseClock(text: string): number | undefined {
  const match = /^(-?)(\d+):(\d{2}):(\d{2}(?:\.\d+)?)$/.exec(text.trim());
  if (!match) return undefined;
  const seconds = Number(match[2]) * 3600 + Number(match[3]) * 60 + Number(match[4]);
  return match[1] === '-' ? -seconds : seconds;
}

/**
 * One line of FFmpeg's stderr under `-loglevel level+...`: `[context @ 0x...] [level] text`.
 * A line without a level continues the previous one's (FFmpeg prints some messages over
 * several lines). Pointer addresses are dropped, so complaints read the same every time.
 */
export function parseStderrLine(raw: string, previousLevel: string): StderrLine | undefined {
  let text = raw.length > MAX_LINE_CHARS ? `${raw.slice(0, MAX_LINE_CHARS)}...` : raw;
  let level = previousLevel;
  const tag = /\[(trace|debug|verbose|info|warning|error|fatal|panic)\] /.exec(text);
  if (tag) {
    level = tag[1] as string;
    text = text.slice(0, tag.index) + text.slice(tag.index + tag[0].length);
  }
  text = text.replace(/ @ 0x[0-9a-f]+\]/gi, ']').trim();
  return text === '' ? undefined : { level, text };
}

/**
 * What FFmpeg complained about: its last error lines (the last lines of any level if it
 * wrote none), minus the ones that only say that it failed.
 */
export function complaintOf(stderr: StderrLine[]): string {
  const noise = /^(Conversion failed!|At least one output file must be specified|Exiting normally, received signal \d+\.)$/;
  const meaningful = stderr.filter((line) => !noise.test(line.text));
  const errors = meaningful.filter((line) => ERROR_LEVELS.has(line.level));
  const chosen = (errors.length > 0 ? errors : meaningful).slice(-COMPLAINT_LINES).map((line) => line.text);
  const unique = chosen.filter((text, index) => chosen.indexOf(text) === index);
  const complaint = unique.join('; ');
  if (complaint === '') return 'FFmpeg said nothing about why';
  return complaint.length > MAX_COMPLAINT_CHARS ? `...${complaint.slice(-MAX_COMPLAINT_CHARS)}` : complaint;
}

// The operating system's words for failures that say nothing against the job: worth another attempt.
const DISK_FULL = /No space left on device|Disk quota exceeded/i;
const SYSTEM_TROUBLE =
  /Input\/output error|Cannot allocate memory|Resource temporarily unavailable|Too many open files|Read-only file system|Stale file handle|Connection reset|Broken pipe/i;

/**
 * Classifies an FFmpeg run that did not succeed (we did not abort it: that case rejects
 * with the signal's reason before getting here). `what` says what the run was for, as in
 * `rendition "240p"`.
 * - killed by a signal (it was not ours) or exit 255 after "received signal": transient
 *   `ffmpeg_killed`;
 * - the system's error words for a full disk: transient `disk_full`; for other system
 *   trouble (I/O error, out of memory, too many open files ...): transient `ffmpeg_io_error`;
 * - `setpriv` unable to start FFmpeg (exit 126/127): fatal `ffmpeg_missing`;
 * - any other non-zero exit: permanent `ffmpeg_rejected`, FFmpeg's complaint in the
 *   message. FFmpeg is deterministic: the same arguments and source fail the same way.
 */
export function classifyFfmpegFailure(exit: FfmpegExit, what: string): JobError {
  const complaint = complaintOf(exit.stderr);
  const all = exit.stderr.map((line) => line.text).join('\n');
  if (exit.signal !== null || (exit.code === 255 && /received signal \d+/i.test(all))) {
    const by = exit.signal ?? /received signal (\d+)/i.exec(all)?.[0] ?? 'a signal';
    return new TransientError('ffmpeg_killed', `transcode: FFmpeg was killed (${by}) during ${what}`);
  }
  if (DISK_FULL.test(all)) return new TransientError('disk_full', `transcode: FFmpeg ran out of disk space during ${what}: ${complaint}`);
  if (SYSTEM_TROUBLE.test(all)) return new TransientError('ffmpeg_io_error', `transcode: FFmpeg hit a system error during ${what}: ${complaint}`);
  if ((exit.code === 126 || exit.code === 127) && /^setpriv: /m.test(all)) {
    return ffmpegMissing(`it could not be started for ${what}: ${complaint}`);
  }
  return new PermanentError('ffmpeg_rejected', `transcode: FFmpeg refused ${what} (exit code ${exit.code}): ${complaint}`);
}

export function ffmpegMissing(why: string): FatalError {
  return new FatalError(
    'ffmpeg_missing',
    `transcode: FFmpeg is missing on this worker: ${why} (looked for ${FFMPEG_SEARCH_ORDER}); ` + 'a worker that offers the "ffmpeg" capability needs it',
  );
}

function spawnFailure(ffmpeg: string, error: Error): JobError {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'ENOENT' || code === 'EACCES' || code === 'ENOEXEC') return ffmpegMissing(`starting ${ffmpeg} failed: ${error.message}`);
  return new TransientError('ffmpeg_spawn_failed', `transcode: could not start FFmpeg (${ffmpeg}): ${error.message}`);
}

export interface MediaInfo {
  /** Seconds; undefined when the container does not say. */
  durationSeconds?: number;
  /** The first video stream's frame size; undefined when there is no video stream. */
  width?: number;
  height?: number;
  hasAudio: boolean;
}

/**
 * What FFmpeg sees in a media file (`ffmpeg -i FILE` with no output, which prints the
 * input's description and exits 1). Rejects as classifyFfmpegFailure says when FFmpeg
 * cannot open or make sense of the file.
 */
export async function probeMedia(ffmpeg: string, file: string, signal: AbortSignal, what: string): Promise<MediaInfo> {
  const exit = await runFfmpeg({ ffmpeg, args: ['-i', fileArgument(file)], signal });
  const lines = exit.stderr.map((line) => line.text);
  if (!lines.some((line) => line.startsWith('Input #0'))) throw classifyFfmpegFailure(exit, what);
  return parseMediaInfo(lines);
}

export function parseMediaInfo(lines: string[]): MediaInfo {
  const info: MediaInfo = { hasAudio: false };
  for (const line of lines) {
    const duration = /^Duration: (\S+?),/.exec(line);
    if (duration && info.durationSeconds === undefined) {
      const seconds = parseClock(duration[1] as string);
      if (seconds !== undefined && seconds > 0) info.durationSeconds = seconds;
    }
    const stream = /^Stream #\d+:\d+.*?: (Video|Audio): (.*)$/.exec(line);
    if (stream?.[1] === 'Audio') info.hasAudio = true;
    if (stream?.[1] === 'Video' && info.width === undefined) {
      const size = /, (\d+)x(\d+)(?=[\s,]|$)/.exec(stream[2] as string);
      if (size) {
        info.width = Number(size[1]);
        info.height = Number(size[2]);
      }
    }
  }
  return info;
}

/** A local path as FFmpeg must take it: `file:` stops a name like `x:y.mp4` being read as a protocol. */
export function fileArgument(file: string): string {
  return `file:${file}`;
}
