import { accessSync, constants, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

/**
 * Finding FFmpeg. The first of these that names an executable file wins:
 *
 * 1. the path in the environment variable `PLANRUN_FFMPEG` (an operator's explicit choice);
 * 2. the binary of the npm package `@ffmpeg-installer/ffmpeg` (an optional dependency of
 *    planrun: `npm install` brings a static FFmpeg for this platform inside a registry
 *    package, and leaves it out, without failing, where the package has no build);
 * 3. `ffmpeg` on `PATH` (the system's FFmpeg).
 *
 * `undefined` when none does: a worker then must not offer the `ffmpeg` capability.
 * Nothing is spawned; the file only has to exist and be executable.
 */
export function locateFfmpeg(options: LocateFfmpegOptions = {}): string | undefined {
  const env = options.env ?? process.env;
  const fromEnv = env.PLANRUN_FFMPEG?.trim();
  if (fromEnv && isExecutableFile(path.resolve(fromEnv))) return path.resolve(fromEnv);
  const packaged = (options.packagedBinary ?? packagedFfmpeg)();
  if (packaged !== undefined && isExecutableFile(packaged)) return packaged;
  return findOnPath(FFMPEG_BINARY, env.PATH);
}

export interface LocateFfmpegOptions {
  /** The environment to read `PATH` and `PLANRUN_FFMPEG` from; `process.env` by default. */
  env?: NodeJS.ProcessEnv;
  /** Where the npm package's binary is, if installed; for tests. */
  packagedBinary?: () => string | undefined;
}

/** Where each source is looked at, in order, for error messages. */
export const FFMPEG_SEARCH_ORDER = 'the PLANRUN_FFMPEG environment variable, then the npm package @ffmpeg-installer/ffmpeg, then "ffmpeg" on PATH';

const FFMPEG_BINARY = process.platform === 'win32' ? 'ffmpeg.exe' : 'ffmpeg';

/** The path the optional dependency reports, or undefined when it is not installed (or has no build for this platform). */
export function packagedFfmpeg(): string | undefined {
  try {
    const require = createRequire(import.meta.url);
    // Its index throws (a string, not an Error) on a platform it has no binary for.
    const installer = require('@ffmpeg-installer/ffmpeg') as { path?: unknown };
    return typeof installer.path === 'string' ? installer.path : undefined;
  } catch {
    return undefined;
  }
}

function findOnPath(binary: string, searchPath: string | undefined): string | undefined {
  for (const dir of (searchPath ?? '').split(path.delimiter)) {
    // An empty entry means the current directory to a shell; an absolute path is safer.
    if (dir === '' || !path.isAbsolute(dir)) continue;
    const candidate = path.join(dir, binary);
    if (isExecutableFile(candidate)) return candidate;
  }
  return undefined;
}

export function isExecutableFile(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return statSync(file).isFile();
  } catch {
    return false;
  }
}
