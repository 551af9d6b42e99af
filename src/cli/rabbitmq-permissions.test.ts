/**
 * `planrun rabbitmq permissions` without --apply: what it prints for each role, and the
 * names it refuses. (--apply is exercised on RabbitMQ by src/deploy/rabbitmq-roles-rabbitmq.test.ts.)
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, describe, it } from 'node:test';
import { tempDir } from '../../test/testing/temp-dir.js';
import { cliPath } from '../../test/testing/worker-process.js';

const dir = tempDir('planrun-rabbitmq-permissions-');
after(() => dir.remove());

function planrun(...args: string[]) {
  const run = spawnSync(process.execPath, [cliPath, ...args], { cwd: dir.path, encoding: 'utf8', timeout: 30_000 });
  return { code: run.status, stdout: run.stdout, stderr: run.stderr };
}

describe('planrun rabbitmq permissions', () => {
  it('prints each role with its regexes, under the prefix, and the rabbitmqctl commands', () => {
    const run = planrun('rabbitmq', 'permissions', '--prefix', 'jobs', '--vhost', 'prod', '--app', 'acme-app=acme', '--worker-types', 'sleep,checksum');
    assert.equal(run.code, 0, run.stderr);
    const lines = run.stdout.split('\n');
    const row = (role: string) => lines.find((line) => line.startsWith(`${role} `))?.split(/\s+/);
    assert.deepEqual(row('orchestrator'), ['orchestrator', 'planrun-orchestrator', '^jobs\\..*$', '^(jobs\\..*|amq\\.default)$', '^jobs\\..*$']);
    assert.deepEqual(row('worker'), ['worker', 'planrun-worker', '^$', '^jobs\\.control$', '^jobs\\.work\\.(sleep|checksum)$']);
    assert.deepEqual(row('app'), [
      'app',
      'acme-app',
      '^jobs\\.app\\.acme-app(\\..+)?$',
      '^(jobs\\.submit|jobs\\.app\\.acme-app(\\..+)?)$',
      '^(jobs\\.results|jobs\\.app\\.acme-app(\\..+)?)$',
    ]);
    assert.ok(lines.includes("rabbitmqctl set_permissions -p 'prod' planrun-worker '^$' '^jobs\\.control$' '^jobs\\.work\\.(sleep|checksum)$'"), run.stdout);
    assert.ok(lines.includes("rabbitmqctl set_topic_permissions -p 'prod' acme-app jobs.results '^$' '^acme\\.'"), run.stdout);
  });

  it('refuses a name that could stand for others in a queue name or a regex', () => {
    for (const [flag, value, what] of [
      ['--app', 'acme.app', 'user name "acme.app"'],
      ['--app', 'acme=a*', 'tenant name "a\\*"'],
      ['--worker-user', 'w#', 'user name "w#"'],
      ['--worker-types', 'a.b', 'job type "a.b"'],
    ] as const) {
      const run = planrun('rabbitmq', 'permissions', flag, value);
      assert.equal(run.code, 2, run.stderr);
      assert.match(run.stderr, new RegExp(`${what} must start with a letter`));
    }
  });
});
