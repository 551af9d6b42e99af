/**
 * Where the CLI takes its RabbitMQ URL from: `--amqp-file` and PLANRUN_AMQP_URL keep the
 * password off the command line, and `--amqp` with a password works but warns once,
 * never repeating the password. Against a port nothing listens on, so each command
 * stops at its connection error, which names the URL it used (password hidden).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { tempDir } from '../../test/testing/temp-dir.js';
import { cliPath } from '../../test/testing/worker-process.js';

const dir = tempDir('planrun-amqp-url-');
after(() => dir.remove());

const password = 's3cret-pw';
const unreachable = `amqp://planrun:${password}@127.0.0.1:1/`;
const warning = /warning: --amqp carries a password/g;

function planrun(args: string[], env: NodeJS.ProcessEnv = {}) {
  const { PLANRUN_AMQP_URL: _amqp, ...inherited } = process.env;
  // Orchestrator and up keep their data in the test's folder (workers have none).
  const dataDir = args[0] === 'worker' ? [] : ['--data-dir', join(dir.path, 'data')];
  const run = spawnSync(process.execPath, [cliPath, ...args, ...dataDir], {
    cwd: dir.path,
    encoding: 'utf8',
    timeout: 30_000,
    env: { ...inherited, ...env },
  });
  return { code: run.status, stderr: run.stderr, stdout: run.stdout };
}

function file(name: string, text: string): string {
  const path = join(dir.path, name);
  writeFileSync(path, text);
  return path;
}

describe('the RabbitMQ URL on the command line', () => {
  it('--amqp with a password warns once on stderr, without the password, and is used', () => {
    const run = planrun(['orchestrator', '--amqp', unreachable]);
    assert.equal(run.code, 2, run.stderr);
    assert.equal(run.stderr.match(warning)?.length, 1, run.stderr);
    assert.match(run.stderr, /PLANRUN_AMQP_URL or in a file named by --amqp-file/);
    assert.match(run.stderr, /cannot connect to RabbitMQ at amqp:\/\/planrun:\*\*\*@127\.0\.0\.1:1\//);
    assert.doesNotMatch(run.stdout + run.stderr, new RegExp(password));
  });

  it('--amqp without a password, PLANRUN_AMQP_URL and --amqp-file do not warn', () => {
    const runs = [
      planrun(['orchestrator', '--amqp', 'amqp://127.0.0.1:1/']),
      planrun(['orchestrator'], { PLANRUN_AMQP_URL: unreachable }),
      planrun(['orchestrator', '--amqp-file', file('url', `${unreachable}\n`)]),
    ];
    for (const run of runs) {
      assert.equal(run.code, 2, run.stderr);
      assert.doesNotMatch(run.stderr, warning);
      assert.match(run.stderr, /cannot connect to RabbitMQ at amqp:\/\/(planrun:\*\*\*@)?127\.0\.0\.1:1\//);
      assert.doesNotMatch(run.stderr, new RegExp(password));
    }
  });

  it('--amqp-file wins over PLANRUN_AMQP_URL', () => {
    const run = planrun(['orchestrator', '--amqp-file', file('other-url', 'amqp://from-file:pw@127.0.0.1:1/')], { PLANRUN_AMQP_URL: unreachable });
    assert.match(run.stderr, /cannot connect to RabbitMQ at amqp:\/\/from-file:\*\*\*@127\.0\.0\.1:1\//);
  });

  it('a missing, unreadable or empty --amqp-file is a usage error saying which', () => {
    const folder = join(dir.path, 'a-folder');
    mkdirSync(folder);
    const cases: Array<[string, RegExp]> = [
      [join(dir.path, 'nosuch'), /--amqp-file .*nosuch: no such file/],
      [folder, /--amqp-file .*a-folder: cannot read it \(EISDIR\)/],
      [file('empty', '\n  \n'), /--amqp-file .*empty is empty: it should hold the RabbitMQ URL/],
      [file('two', 'amqp://a@h/\namqp://b@h/\n'), /--amqp-file .*two should hold one RabbitMQ URL and nothing else/],
    ];
    for (const [path, message] of cases) {
      const run = planrun(['worker', '--amqp-file', path]);
      assert.equal(run.code, 2, run.stderr);
      assert.match(run.stderr, message);
    }
  });

  it('--amqp and --amqp-file together are refused', () => {
    const run = planrun(['up', '--amqp', 'amqp://127.0.0.1:1/', '--amqp-file', file('url2', unreachable)]);
    assert.equal(run.code, 2, run.stderr);
    assert.match(run.stderr, /option '--amqp-file <path>' cannot be used with option '--amqp <url>'/);
  });

  it('takes a cluster as several --amqp or a comma-separated list, tries every node, and names each without its password', () => {
    for (const args of [
      ['--amqp', `amqp://planrun:${password}@127.0.0.1:1`, '--amqp', '127.0.0.1:2'],
      ['--amqp', `amqp://planrun:${password}@127.0.0.1:1,127.0.0.1:2`],
    ]) {
      const run = planrun(['orchestrator', ...args]);
      assert.equal(run.code, 2, run.stderr);
      assert.match(run.stderr, /cannot connect to RabbitMQ at amqp:\/\/planrun:\*\*\*@127\.0\.0\.1:1,127\.0\.0\.1:2/);
      assert.match(run.stderr, /127\.0\.0\.1:2.*ECONNREFUSED/s, 'the second node was tried');
      assert.doesNotMatch(run.stdout + run.stderr, new RegExp(password));
    }
  });

  it('a list it cannot read, --queue-type without RabbitMQ or of another type are usage errors', () => {
    const cases: Array<[string[], RegExp]> = [
      [['worker', '--amqp', 'amqp://127.0.0.1:1/vh,127.0.0.1:2'], /RabbitMQ URL: .*only the last host may be followed by a vhost/],
      [['worker', '--amqp', '127.0.0.1:1'], /RabbitMQ URL: the RabbitMQ URL list must start with amqp:\/\//],
      [['orchestrator', '--broker-socket', join(dir.path, 'b.sock'), '--queue-type', 'quorum'], /--queue-type applies to RabbitMQ/],
      [['worker', '--amqp', 'amqp://127.0.0.1:1', '--queue-type', 'stream'], /argument 'stream' is invalid. Allowed choices are classic, quorum/],
    ];
    for (const [args, message] of cases) {
      const run = planrun(args);
      assert.equal(run.code, 2, run.stderr);
      assert.match(run.stderr, message);
    }
  });
});
