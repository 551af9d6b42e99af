/**
 * How the built CLI answers a user who gets something wrong, and what its --help says:
 * every usage error exits 2 (commander's own as well as planrun's), a duration needs its
 * unit, `up` refuses a lease TTL its heartbeats cannot keep, and defaults show as a user
 * writes them.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { tempDir } from '../../test/testing/temp-dir.js';
import { cliPath } from '../../test/testing/worker-process.js';

const cwd = tempDir('planrun-usage-');
after(() => cwd.remove());

function planrun(...args: string[]) {
  const { PLANRUN_URL: _url, PLANRUN_KEY: _key, PLANRUN_AMQP_URL: _amqp, PLANRUN_LEDGER: _ledger, ...env } = process.env;
  const run = spawnSync(process.execPath, [cliPath, ...args], { cwd: cwd.path, encoding: 'utf8', timeout: 30_000, env });
  return { code: run.status, stdout: run.stdout, stderr: run.stderr, flat: (run.stdout + run.stderr).replace(/\s+/g, ' ') };
}

describe('planrun usage errors', () => {
  it('exit 2, commander’s own included, each saying what is wrong', () => {
    const cases: Array<[string[], RegExp]> = [
      [['jobs', '--limit', '0'], /option '--limit <n>' argument '0' is invalid\. expected a whole number of at least 1/],
      [['up', '--port', 'abc'], /option '--port <n>' argument 'abc' is invalid/],
      [['orchestrator', '--max-attempts', '0'], /option '--max-attempts <n>' argument '0' is invalid/],
      [['keys', 'create'], /required option '--tenant <name>' not specified/],
      [['keys', 'create', '--admin', '--tenant', 'acme'], /--admin and --tenant exclude each other/],
      [
        ['orchestrator', '--rate-limit', 'fast'],
        /option '--rate-limit <rate>' argument 'fast' is invalid\. expected requests per key and window such as 100\/s, 600\/min or 5000\/h \(or off\), got "fast"/,
      ],
      [['up', '--rate-limit', '0/s'], /option '--rate-limit <rate>' argument '0\/s' is invalid/],
      [['status'], /missing required argument 'id'/],
      [['jobs', '--bogus'], /unknown option '--bogus'/],
      [['nosuch'], /unknown command 'nosuch'/],
      [['jobs', '--state', 'done'], /expected one of queued, running, finished, failed, got "done"/],
      [['up', '--submit-tenant-from', 'user-id'], /--submit-tenant-from user-id needs RabbitMQ/],
      [['orchestrator', '--amqp', 'amqp://127.0.0.1:1/', '--tenant-map', 'map.json'], /--tenant-map applies with --submit-tenant-from user-id/],
      [['orchestrator', '--submit-tenant-from', 'nobody'], /argument 'nobody' is invalid\. Allowed choices are body, user-id/],
      [[], /^Usage: planrun /m],
    ];
    for (const [args, message] of cases) {
      const run = planrun(...args);
      assert.equal(run.code, 2, `planrun ${args.join(' ')}: ${run.stderr}`);
      assert.match(run.stderr, message, args.join(' '));
      assert.equal(run.stdout, '', args.join(' '));
    }
    assert.equal(existsSync(join(cwd.path, '.planrun')), false, 'no usage error leaves data behind');
  });

  it('--help and --version exit 0', () => {
    for (const args of [['--help'], ['--version'], ['up', '--help'], ['help', 'submit']]) assert.equal(planrun(...args).code, 0, args.join(' '));
  });

  it('--store-part-size takes a size S3 accepts, and only with --store', () => {
    const amqp = ['--amqp', 'amqp://127.0.0.1:1'];
    const small = planrun('orchestrator', ...amqp, '--store', 's3://bucket/prefix', '--store-part-size', '4MiB');
    assert.equal(small.code, 2);
    assert.match(small.stderr, /--store-part-size must be between 5MiB and 5GiB \(S3's limits\), not 4m/);
    const large = planrun('up', '--store', 's3://bucket/prefix', '--store-part-size', '6GiB');
    assert.equal(large.code, 2);
    assert.match(large.stderr, /--store-part-size must be between 5MiB and 5GiB/);
    const alone = planrun('orchestrator', ...amqp, '--store-part-size', '8MiB');
    assert.equal(alone.code, 2);
    assert.match(alone.stderr, /--store-part-size and --store-cleanup-grace go with --store s3:\/\/bucket\/prefix/);
    const notASize = planrun('orchestrator', ...amqp, '--store', 's3://bucket/prefix', '--store-part-size', 'big');
    assert.equal(notASize.code, 2);
    assert.match(notASize.stderr, /expected a size such as 512k, 64m or 2g, got "big"/);
  });

  it('a duration without a unit is refused, with the unit it probably meant', () => {
    const ttl = planrun('up', '--lease-ttl', '90');
    assert.equal(ttl.code, 2);
    assert.match(ttl.stderr, /option '--lease-ttl <duration>' argument '90' is invalid\. "90" has no unit: 90s\? \(a duration reads like 500ms, 4s, 2m, 1h\)/);
    const backoff = planrun('orchestrator', '--backoff', '2000');
    assert.equal(backoff.code, 2);
    assert.match(backoff.stderr, /"2000" has no unit: 2000ms\?/);
    const grace = planrun('worker', '--stop-grace', 'soon');
    assert.equal(grace.code, 2);
    assert.match(grace.stderr, /not a duration: "soon"/);
  });

  it('up refuses a lease TTL shorter than two heartbeat intervals before it starts anything', () => {
    const run = planrun('up', '--lease-ttl', '90ms', '--port', '1');
    assert.equal(run.code, 2);
    assert.equal(
      run.stderr,
      'planrun: --lease-ttl 90ms is shorter than 2 × --heartbeat-interval 30s: leases would run out between heartbeats and jobs would lose their attempts to lease_expired. ' +
        'Give --lease-ttl at least 1m, or a shorter --heartbeat-interval.\n',
    );
    const slowHeartbeat = planrun('up', '--heartbeat-interval', '1m', '--port', '1');
    assert.equal(slowHeartbeat.code, 2);
    assert.match(slowHeartbeat.stderr, /--lease-ttl 90s is shorter than 2 × --heartbeat-interval 1m/);
    const noWindow = planrun('orchestrator', '--grant-window', '0s');
    assert.equal(noWindow.code, 2);
    assert.match(noWindow.stderr, /--grant-window.*expected a duration above 0 \(e\.g\. 15s, 5s\), or off/);
    assert.equal(existsSync(join(cwd.path, '.planrun')), false);
  });
});

describe('planrun --help', () => {
  it('shows durations and sizes as a user writes them, and no empty-list defaults', () => {
    const up = planrun('up', '--help').flat;
    assert.match(up, /--lease-ttl <duration> how long a lease lasts without a heartbeat \(default: 90s\)/);
    assert.match(up, /--heartbeat-interval <duration> how often workers renew their leases \(default: 30s\)/);
    assert.match(up, /--backoff <duration> .*? \(default: 2s\)/);
    assert.match(up, /--sweep-interval <duration> .*? \(default: 1s\)/);
    const orchestrator = planrun('orchestrator', '--help').flat;
    assert.match(orchestrator, /--redispatch-after <duration> .*? \(default: 5m\)/);
    assert.match(orchestrator, /--grant-window <duration> .*? \(default: 15s\)/);
    assert.match(up, /--grant-window <duration> .*? \(default: 15s\)/);
    const worker = planrun('worker', '--help').flat;
    assert.match(worker, /--output-reserve <size> .*? \(default: 64m\)/);
    assert.match(worker, /--abort-grace <duration> .*? \(default: 10s\)/);
    assert.match(worker, /--control-timeout <duration> .*? \(default: 5s\)/);
    for (const help of [up, orchestrator, worker]) {
      assert.doesNotMatch(help, /default: \[\]/);
      assert.doesNotMatch(help.replace('--port <n> the HTTP API port (default: 7700)', ''), /default: \d{4,}\)/, 'no default in raw milliseconds or bytes');
    }
  });
});
