import { spawnSync } from 'node:child_process';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { locateFfmpeg } from '../../src/job-types/ffmpeg.js';

/** Writes `<dir>/clip.mp4`, one second of 64x36 test picture (so that FFmpeg is quick), and returns its path. */
export function makeTestClip(dir: string): string {
  const ffmpeg = locateFfmpeg();
  assert.ok(ffmpeg, 'FFmpeg (the npm package @ffmpeg-installer/ffmpeg) is installed');
  const args = ['-hide_banner', '-loglevel', 'error', '-f', 'lavfi', '-i', 'testsrc=size=64x36:rate=10:duration=1'];
  const made = spawnSync(ffmpeg, [...args, '-c:v', 'libx264', '-pix_fmt', 'yuv420p', '-y', 'clip.mp4'], { cwd: dir, encoding: 'utf8' });
  assert.equal(made.status, 0, made.stderr);
  return join(dir, 'clip.mp4');
}
