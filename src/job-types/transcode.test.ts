import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { chmod, copyFile, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import type { JobContext, JobRunResult } from '../worker/runner/job-type.js';
import { locateFfmpeg } from './ffmpeg.js';
import jobTypes from './index.js';
import { GENERATED_SOURCE, makeTranscodeJobType, transcode } from './transcode.js';
import { classifyFfmpegFailure, outTimeSeconds, parseStderrLine, type StderrLine } from './transcode-process.js';

const ffmpeg = locateFfmpeg();

let root: string;
/** A 1 s, 128x72 mp4 made once, used as a source file. */
let sourceClip: string;

before(async () => {
  assert.ok(ffmpeg, 'FFmpeg must be installed for these tests (npm ci installs @ffmpeg-installer/ffmpeg)');
  root = await mkdtemp(path.join(tmpdir(), 'planrun-transcode-test-'));
  const made = await runDirectly(transcode.run, { durationSeconds: 1, renditions: [{ name: 'source', height: 72 }] });
  sourceClip = path.join(root, 'source.mp4');
  await copyFile(path.join(made.scratchDir, 'source.mp4'), sourceClip);
});
after(() => rm(root, { recursive: true, force: true }));

interface Reported {
  fraction: number;
  message: string | undefined;
}

interface Ran {
  result: JobRunResult;
  reported: Reported[];
  scratchDir: string;
}

let scratchCount = 0;

/** Runs a job type in this process, as a job process would (minus the throttle), in a fresh scratch folder. */
async function runDirectly(
  run: (ctx: JobContext) => Promise<JobRunResult> | JobRunResult,
  input: unknown,
  options: { signal?: AbortSignal; onProgress?: (report: Reported) => void; prepare?: (scratchDir: string) => Promise<void> } = {},
): Promise<Ran> {
  const scratchDir = path.join(root, `scratch-${++scratchCount}`);
  await mkdir(scratchDir);
  await options.prepare?.(scratchDir);
  const reported: Reported[] = [];
  const ctx: JobContext = {
    input,
    scratchDir,
    signal: options.signal ?? new AbortController().signal,
    jobId: 'job-1',
    attempt: 1,
    tenant: 'acme',
    log: () => undefined,
    progress: (fraction, message) => {
      reported.push({ fraction, message });
      options.onProgress?.({ fraction, message });
    },
  };
  return { result: await run(ctx), reported, scratchDir };
}

/** What FFmpeg itself says of a file: codec and frame size of its video, its duration. */
function probe(file: string): { codec: string; width: number; height: number; durationSeconds: number; hasAudio: boolean } {
  const { stderr } = spawnSync(ffmpeg as string, ['-hide_banner', '-i', file], { encoding: 'utf8' });
  const video = /Stream #0:\d+.*?: Video: (\w+).*?, (\d+)x(\d+)[\s,]/.exec(stderr);
  const duration = /Duration: (\d+):(\d+):(\d+\.\d+)/.exec(stderr);
  assert.ok(video && duration, `FFmpeg cannot read ${file}:\n${stderr}`);
  return {
    codec: video[1] as string,
    width: Number(video[2]),
    height: Number(video[3]),
    durationSeconds: Number(duration[1]) * 3600 + Number(duration[2]) * 60 + Number(duration[3]),
    hasAudio: /Stream #0:\d+.*?: Audio: /.test(stderr),
  };
}

/** Processes whose parent is `parentPid` and whose name is ffmpeg, from /proc. */
function ffmpegChildrenOf(parentPid: number): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = readProcStat(Number(entry));
    if (stat?.comm === 'ffmpeg' && stat.ppid === parentPid && stat.state !== 'Z') pids.push(Number(entry));
  }
  return pids;
}

function readProcStat(pid: number): { comm: string; state: string; ppid: number } | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const close = text.lastIndexOf(')');
    const [state, ppid] = text.slice(close + 2).split(' ');
    return { comm: text.slice(text.indexOf('(') + 1, close), state: state as string, ppid: Number(ppid) };
  } catch {
    return undefined;
  }
}

/** Gone, or a zombie nobody reaped yet (it runs no more either way). */
function isRunning(pid: number): boolean {
  const state = readProcStat(pid)?.state;
  return state !== undefined && state !== 'Z' && state !== 'X';
}

async function waitUntil(condition: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) assert.fail(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await delay(20);
  }
}

test('planrun ships transcode, needing the ffmpeg capability and reserving room for its outputs', () => {
  const shipped = jobTypes.find((jobType) => jobType.name === 'transcode');
  assert.equal(shipped, transcode);
  assert.deepEqual(transcode.requires, ['ffmpeg']);
  assert.ok((transcode.outputReserveBytes ?? 0) >= 64 * 1024 * 1024);
});

describe('transcode renders', () => {
  test('a generated clip into renditions that are valid video of the asked heights', async () => {
    const { result, scratchDir } = await runDirectly(transcode.run, {
      durationSeconds: 1,
      renditions: [
        { name: 'small', height: 72 },
        { name: 'tiny', height: 48, format: 'webm', videoBitrate: '100k' },
      ],
    });
    assert.deepEqual(result.outputs, ['small.mp4', 'tiny.webm']);
    assert.deepEqual((await readdir(scratchDir)).sort(), ['small.mp4', 'tiny.webm']);

    const mp4 = await readFile(path.join(scratchDir, 'small.mp4'));
    assert.equal(mp4.subarray(4, 8).toString('latin1'), 'ftyp', 'an MP4 starts with an ftyp box');
    const webm = await readFile(path.join(scratchDir, 'tiny.webm'));
    assert.deepEqual([...webm.subarray(0, 4)], [0x1a, 0x45, 0xdf, 0xa3], 'a WebM starts with the EBML magic');

    const small = probe(path.join(scratchDir, 'small.mp4'));
    const tiny = probe(path.join(scratchDir, 'tiny.webm'));
    assert.deepEqual([small.codec, small.width, small.height, small.hasAudio], ['h264', 128, 72, true]);
    assert.deepEqual([tiny.codec, tiny.height, tiny.width % 2, tiny.hasAudio], ['vp9', 48, 0, true]);
    assert.ok(Math.abs(small.durationSeconds - 1) < 0.2, `${small.durationSeconds} s`);

    const data = result.data as { source: string; durationSeconds: number; renditions: Record<string, unknown>[] };
    assert.equal(data.source, GENERATED_SOURCE);
    assert.equal(data.durationSeconds, 1);
    assert.deepEqual(data.renditions[0], {
      name: 'small',
      file: 'small.mp4',
      format: 'mp4',
      width: 128,
      height: 72,
      bytes: mp4.length,
      durationSeconds: small.durationSeconds,
    });
    assert.deepEqual(data.renditions[1], {
      name: 'tiny',
      file: 'tiny.webm',
      format: 'webm',
      width: tiny.width,
      height: 48,
      bytes: webm.length,
      durationSeconds: tiny.durationSeconds,
      videoBitrate: 100_000,
    });
  });

  test('with no renditions given, 240p and 144p mp4 (what `--input {}` gets)', async () => {
    const { result, scratchDir } = await runDirectly(transcode.run, { durationSeconds: 0.5 });
    assert.deepEqual(result.outputs, ['240p.mp4', '144p.mp4']);
    assert.equal(probe(path.join(scratchDir, '240p.mp4')).height, 240);
    assert.equal(probe(path.join(scratchDir, '144p.mp4')).height, 144);
  });

  test('a source file, given as a path or a file: URL, cut to durationSeconds', async () => {
    const byPath = await runDirectly(transcode.run, { source: sourceClip, renditions: [{ name: 'out', height: 48 }] });
    assert.equal((byPath.result.data as { source: string }).source, sourceClip);
    const whole = probe(path.join(byPath.scratchDir, 'out.mp4'));
    assert.equal(whole.height, 48);
    assert.ok(Math.abs(whole.durationSeconds - 1) < 0.2, `${whole.durationSeconds} s`);
    assert.equal(byPath.reported.at(-1)?.fraction, 1);

    const byUrl = await runDirectly(transcode.run, {
      source: pathToFileURL(sourceClip).href,
      durationSeconds: 0.4,
      renditions: [{ name: 'cut', height: 32, format: 'webm' }],
    });
    const cut = probe(path.join(byUrl.scratchDir, 'cut.webm'));
    assert.equal(cut.height, 32);
    assert.ok(cut.durationSeconds < 0.7, `cut to ${cut.durationSeconds} s`);
    assert.equal((byUrl.result.data as { durationSeconds: number }).durationSeconds, 0.4);
  });

  test('reports progress read from FFmpeg, never going back, ending at 1', async () => {
    // `realtime` makes FFmpeg take as long as the clip, so it reports progress midway.
    const { reported } = await runDirectly(transcode.run, {
      durationSeconds: 1.2,
      filter: 'realtime',
      renditions: [
        { name: 'first', height: 32 },
        { name: 'second', height: 16 },
      ],
    });
    const fractions = reported.map((report) => report.fraction);
    for (let i = 1; i < fractions.length; i++) assert.ok(fractions[i]! >= fractions[i - 1]!, `went back: ${fractions.join(', ')}`);
    assert.equal(fractions[0], 0);
    assert.equal(fractions.at(-1), 1);
    const midway = reported.filter((report) => ![0, 0.5, 1].includes(report.fraction));
    assert.ok(midway.length >= 2, `FFmpeg's progress inside renditions: ${fractions.join(', ')}`);
    assert.ok(midway.some((report) => report.fraction < 0.5 && report.message === 'rendition first (1 of 2)'));
    assert.ok(midway.some((report) => report.fraction > 0.5 && report.message === 'rendition second (2 of 2)'));
  });
});

describe('transcode fails', () => {
  for (const filter of ['nosuchfilter=1', 'scale=-7:abc']) {
    test(`permanently, with FFmpeg's complaint, on a filter it refuses: ${filter}`, async () => {
      let scratchDir = '';
      await assert.rejects(
        runDirectly(
          transcode.run,
          { durationSeconds: 1, filter, renditions: [{ name: 'r', height: 32 }] },
          {
            prepare: async (dir) => void (scratchDir = dir),
          },
        ),
        (error: Error & { errorClass?: string; code?: string }) => {
          assert.equal(error.errorClass, 'permanent');
          assert.equal(error.code, 'ffmpeg_rejected');
          assert.match(error.message, /rendition "r"/);
          assert.match(error.message, filter === 'nosuchfilter=1' ? /No such filter: 'nosuchfilter'/ : /'abc'/);
          assert.doesNotMatch(error.message, /0x[0-9a-f]{6,}/, 'no pointer addresses');
          return true;
        },
      );
      assert.deepEqual(await readdir(scratchDir), [], 'no partial output left');
    });
  }

  test('permanently on a source FFmpeg cannot decode, and on bad input, naming the field', async () => {
    const garbage = path.join(root, 'garbage.mp4');
    await writeFile(garbage, Buffer.alloc(4096, 0x5a));
    await assert.rejects(runDirectly(transcode.run, { source: garbage }), {
      errorClass: 'permanent',
      code: 'ffmpeg_rejected',
      message: /source .*garbage\.mp4.*Invalid data found when processing input/,
    });

    const audioOnly = path.join(root, 'tone.m4a');
    spawnSync(ffmpeg as string, ['-nostdin', '-loglevel', 'error', '-f', 'lavfi', '-i', 'sine=duration=0.2', '-y', audioOnly]);
    const cases: [unknown, RegExp][] = [
      ['a string', /must be an object/],
      [[], /must be an object/],
      [{ rendition: [] }, /unknown field "rendition"/],
      [{ renditions: [] }, /renditions must be a list/],
      [{ renditions: [{ name: 'a/b', height: 72 }] }, /renditions\[0\]\.name/],
      [{ renditions: [{ name: 'a', height: 73 }] }, /renditions\[0\]\.height/],
      [{ renditions: [{ name: 'a', height: '72' }] }, /renditions\[0\]\.height/],
      [{ renditions: [{ name: 'a', height: 72, format: 'avi' }] }, /renditions\[0\]\.format/],
      [{ renditions: [{ name: 'a', height: 72, videoBitrate: 'fast' }] }, /renditions\[0\]\.videoBitrate/],
      [{ renditions: [{ name: 'a', height: 72, codec: 'x' }] }, /renditions\[0\] has an unknown field "codec"/],
      [
        {
          renditions: [
            { name: 'a', height: 72 },
            { name: 'a', height: 48 },
          ],
        },
        /renditions\[1\]\.name "a" is used/,
      ],
      [{ durationSeconds: 0 }, /durationSeconds/],
      [{ durationSeconds: '5' }, /durationSeconds/],
      [{ filter: '' }, /filter/],
      [{ filter: 5 }, /filter/],
      [{ source: 7 }, /source/],
      [{ source: 'http://127.0.0.1/clip.mp4' }, /source .* must be a file path or a file: URL/],
      [{ source: path.join(root, 'no-such-clip.mp4') }, /source .*no-such-clip\.mp4 does not exist/],
      [{ source: root }, /source .* is not a regular file/],
      [{ source: audioOnly }, /source .*tone\.m4a has no video stream/],
    ];
    for (const [input, message] of cases) {
      await assert.rejects(runDirectly(transcode.run, input), { errorClass: 'permanent', code: 'invalid_input', message }, JSON.stringify(input));
    }
  });

  test('transiently when the disk is full', async () => {
    // The output file is a link to /dev/full, where every write fails with ENOSPC.
    await assert.rejects(
      runDirectly(
        transcode.run,
        { durationSeconds: 0.5, renditions: [{ name: 'full', height: 32 }] },
        {
          prepare: (dir) => symlink('/dev/full', path.join(dir, 'full.mp4')),
        },
      ),
      { errorClass: 'transient', code: 'disk_full', message: /No space left on device/ },
    );
  });

  for (const killSignal of ['SIGKILL', 'SIGTERM'] as const) {
    test(`transiently when FFmpeg is killed by someone else (${killSignal})`, async () => {
      let killed: number | undefined;
      await assert.rejects(
        runDirectly(
          transcode.run,
          { durationSeconds: 30, filter: 'realtime', renditions: [{ name: 'r', height: 16 }] },
          {
            onProgress: ({ fraction }) => {
              if (fraction === 0 || killed !== undefined) return;
              [killed] = ffmpegChildrenOf(process.pid);
              assert.ok(killed, 'FFmpeg runs as a child of this process');
              process.kill(killed, killSignal);
            },
          },
        ),
        { errorClass: 'transient', code: 'ffmpeg_killed' },
      );
      assert.ok(killed !== undefined && !isRunning(killed));
    });
  }

  test('fatally when FFmpeg is missing at run time', async () => {
    await assert.rejects(runDirectly(makeTranscodeJobType({ locate: () => undefined }).run, { durationSeconds: 1 }), {
      errorClass: 'fatal',
      code: 'ffmpeg_missing',
      message: /PLANRUN_FFMPEG/,
    });
    const gone = path.join(root, 'ffmpeg-that-was-deleted');
    await assert.rejects(runDirectly(makeTranscodeJobType({ locate: () => gone }).run, { durationSeconds: 1 }), {
      errorClass: 'fatal',
      code: 'ffmpeg_missing',
      message: /ffmpeg-that-was-deleted/,
    });
  });
});

describe('transcode aborted', () => {
  test('kills FFmpeg, removes the partial output and throws the signal’s reason', async () => {
    const controller = new AbortController();
    const reason = new Error('stop now');
    let seen: number[] = [];
    let scratchDir = '';
    let abortedAt = 0;
    await assert.rejects(
      runDirectly(
        transcode.run,
        { durationSeconds: 30, filter: 'realtime', renditions: [{ name: 'r', height: 16 }] },
        {
          signal: controller.signal,
          prepare: async (dir) => void (scratchDir = dir),
          onProgress: ({ fraction }) => {
            if (fraction === 0 || controller.signal.aborted) return;
            seen = ffmpegChildrenOf(process.pid);
            abortedAt = Date.now();
            controller.abort(reason);
          },
        },
      ),
      (error) => error === reason,
    );
    assert.ok(Date.now() - abortedAt < 1000, `took ${Date.now() - abortedAt} ms to stop`);
    assert.equal(seen.length, 1, 'one FFmpeg was running midway');
    for (const pid of seen) assert.ok(!isRunning(pid), `FFmpeg ${pid} still runs`);
    assert.deepEqual(ffmpegChildrenOf(process.pid), []);
    assert.deepEqual(await readdir(scratchDir), []);
  });

  test('before it starts, starts no FFmpeg', async () => {
    const controller = new AbortController();
    const reason = new Error('not now');
    controller.abort(reason);
    await assert.rejects(runDirectly(transcode.run, {}, { signal: controller.signal }), (error) => error === reason);
    assert.deepEqual(ffmpegChildrenOf(process.pid), []);
  });

  test('or not: FFmpeg dies with a job process killed by SIGKILL', async () => {
    const moduleUrl = new URL('./transcode.js', import.meta.url).href;
    const script = `
      import { transcode } from ${JSON.stringify(moduleUrl)};
      await transcode.run({
        input: { durationSeconds: 30, filter: 'realtime', renditions: [{ name: 'r', height: 16 }] },
        scratchDir: ${JSON.stringify(root)}, signal: new AbortController().signal,
        jobId: 'j', attempt: 1, tenant: 't', progress() {}, log() {},
      });`;
    const jobProcess = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: 'ignore' });
    let ffmpegPids: number[] = [];
    try {
      await waitUntil(() => (ffmpegPids = ffmpegChildrenOf(jobProcess.pid as number)).length > 0, 10_000, 'FFmpeg to start');
      jobProcess.kill('SIGKILL');
      await waitUntil(() => ffmpegPids.every((pid) => !isRunning(pid)), 2000, `FFmpeg ${ffmpegPids.join(', ')} to die`);
    } finally {
      jobProcess.kill('SIGKILL');
      for (const pid of ffmpegPids) if (isRunning(pid)) process.kill(pid, 'SIGKILL');
    }
  });
});

describe('locateFfmpeg', () => {
  test('finds FFmpeg here and it runs', () => {
    assert.ok(ffmpeg);
    const { status, stdout } = spawnSync(ffmpeg, ['-hide_banner', '-version'], { encoding: 'utf8' });
    assert.equal(status, 0);
    assert.match(stdout, /^ffmpeg version/);
  });

  test('takes PLANRUN_FFMPEG, then the npm package, then PATH, skipping what is not executable', async () => {
    const dir = await mkdtemp(path.join(root, 'locate-'));
    const make = async (name: string, mode = 0o755): Promise<string> => {
      const file = path.join(dir, name);
      await mkdir(path.dirname(file), { recursive: true });
      await writeFile(file, '#!/bin/sh\n');
      await chmod(file, mode);
      return file;
    };
    const packaged = await make('package/ffmpeg');
    const onPath = await make('bin/ffmpeg');
    const fromEnv = await make('env/my-ffmpeg');
    const notExecutable = await make('plain/ffmpeg', 0o644);
    const env = { PATH: [path.join(dir, 'plain'), path.join(dir, 'bin')].join(path.delimiter), PLANRUN_FFMPEG: fromEnv };

    const withoutEnv = { PATH: env.PATH };
    assert.equal(locateFfmpeg({ env, packagedBinary: () => packaged }), fromEnv);
    assert.equal(locateFfmpeg({ env: withoutEnv, packagedBinary: () => packaged }), packaged);
    assert.equal(locateFfmpeg({ env: withoutEnv, packagedBinary: () => notExecutable }), onPath);
    assert.equal(locateFfmpeg({ env: { ...env, PLANRUN_FFMPEG: notExecutable }, packagedBinary: () => packaged }), packaged);
    assert.equal(locateFfmpeg({ env: { PATH: path.join(dir, 'plain') }, packagedBinary: () => undefined }), undefined);
    assert.equal(locateFfmpeg({ env: {}, packagedBinary: () => undefined }), undefined);
  });
});

describe('reading FFmpeg', () => {
  const lines = (text: string): StderrLine[] => {
    let level = 'info';
    return text.split('\n').flatMap((raw) => {
      const line = parseStderrLine(raw, level);
      if (line) level = line.level;
      return line ? [line] : [];
    });
  };

  test('stderr lines: levels, continuation lines, no pointer addresses', () => {
    assert.deepEqual(
      lines("[Parsed_scale_0 @ 0x1828a100] [error] Error when evaluating the expression 'abc'.\nMaybe self-referencing.\n[info] Conversion failed!"),
      [
        { level: 'error', text: "[Parsed_scale_0] Error when evaluating the expression 'abc'." },
        { level: 'error', text: 'Maybe self-referencing.' },
        { level: 'info', text: 'Conversion failed!' },
      ],
    );
  });

  test('progress blocks: out_time_us, the older out_time_ms (also microseconds), out_time', () => {
    assert.equal(outTimeSeconds({ out_time_us: '1500000' }), 1.5);
    assert.equal(outTimeSeconds({ out_time_ms: '2500000' }), 2.5);
    assert.equal(outTimeSeconds({ out_time_us: 'N/A', out_time: '00:01:02.500000' }), 62.5);
    assert.equal(outTimeSeconds({ out_time: '-00:00:00.040000' }), 0);
    assert.equal(outTimeSeconds({ out_time: 'N/A' }), undefined);
  });

  test('failures by class', () => {
    const classify = (code: number | null, signal: NodeJS.Signals | null, text: string) =>
      classifyFfmpegFailure({ code, signal, stderr: lines(text) }, 'rendition "r"');
    assert.deepEqual(classify(1, null, "[AVFilterGraph @ 0x1] [error] No such filter: 'x'\n[info] Conversion failed!").toJSON(), {
      class: 'permanent',
      code: 'ffmpeg_rejected',
      message: `transcode: FFmpeg refused rendition "r" (exit code 1): [AVFilterGraph] No such filter: 'x'`,
    });
    assert.equal(classify(null, 'SIGKILL', '').code, 'ffmpeg_killed');
    assert.equal(classify(255, null, '[info] Exiting normally, received signal 15.').code, 'ffmpeg_killed');
    assert.equal(classify(1, null, '[error] av_interleaved_write_frame(): No space left on device').code, 'disk_full');
    assert.equal(classify(1, null, '[error] Error writing trailer: Input/output error').code, 'ffmpeg_io_error');
    assert.equal(classify(127, null, 'setpriv: failed to execute /x/ffmpeg: No such file or directory').errorClass, 'fatal');
    assert.equal(classify(1, null, '').message, 'transcode: FFmpeg refused rendition "r" (exit code 1): FFmpeg said nothing about why');
  });
});
