/**
 * The one-command experience, as a user gets it: `planrun up` in a fresh folder, then the
 * client commands against it, on the embedded broker and on RabbitMQ.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { freePort } from '../../test/testing/free-port.js';
import { isAlive } from '../../test/testing/processes.js';
import pg from 'pg';
import { postgresUrl, rabbitMqUrl } from '../../test/testing/services.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { waitFor } from '../../test/testing/wait.js';
import { cliPath } from '../../test/testing/worker-process.js';

interface Up {
  child: ChildProcess;
  url: string;
  dir: string;
  output(): string;
}

function childPids(pid: number): number[] {
  const listed = spawnSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' }).stdout;
  return listed.split('\n').filter(Boolean).map(Number);
}

function cli(dir: string, url: string, ...args: string[]) {
  return spawnSync(process.execPath, [cliPath, ...args, '--url', url, '--data-dir', join(dir, '.planrun')], { cwd: dir, encoding: 'utf8', timeout: 60_000 });
}

const setups = [
  { broker: 'embedded', ledger: 'sqlite' },
  { broker: 'rabbitmq', ledger: 'sqlite' },
  { broker: 'embedded', ledger: 'postgres' },
] as const;

for (const { broker, ledger } of setups) {
  describe(`planrun up on the ${broker} broker with the ${ledger} ledger`, () => {
    const dir = tempDir('planrun-up-');
    const schema = `up_${process.pid}_${Date.now()}`;
    let up: Up | undefined;

    after(async () => {
      if (up && up.child.exitCode === null) {
        up.child.kill('SIGKILL');
        for (const pid of childPids(up.child.pid!)) process.kill(pid, 'SIGKILL');
      }
      dir.remove();
      if (ledger === 'postgres') {
        const client = new pg.Client({ connectionString: postgresUrl });
        await client.connect();
        await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
        await client.end();
      }
    });

    it('starts the API and workers in a fresh folder; submit --wait finishes a transcode with the saved key', async () => {
      const port = await freePort();
      // The URL (password included) comes from a file, and reaches the workers off their command line.
      const urlFile = join(dir.path, 'amqp.url');
      if (broker === 'rabbitmq') writeFileSync(urlFile, `${rabbitMqUrl}\n`);
      const args = [
        cliPath,
        'up',
        '--port',
        String(port),
        '--workers',
        '2',
        '--slots',
        '1',
        '--heartbeat-interval',
        '500ms',
        '--lease-ttl',
        '3s',
        ...(broker === 'rabbitmq' ? ['--amqp-file', urlFile, '--prefix', `up${port}`] : []),
        ...(ledger === 'postgres' ? ['--ledger', `${postgresUrl}?schema=${schema}`] : []),
      ];
      const child = spawn(process.execPath, args, { cwd: dir.path, stdio: ['ignore', 'pipe', 'pipe'] });
      let output = '';
      child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
      up = { child, url: `http://127.0.0.1:${port}`, dir: dir.path, output: () => output };
      await waitFor('planrun up to print its banner', () => output.includes('planrun is up'), 20_000);
      const key = readFileSync(join(dir.path, '.planrun', 'local-key'), 'utf8').trim();
      assert.match(output, new RegExp(`key\\s+${key}`));
      await waitFor(
        'two workers in the fleet',
        async () => {
          const fleet = await fetch(`${up!.url}/v1/fleet`, { headers: { authorization: `Bearer ${key}` } });
          return ((await fleet.json()) as { workers: unknown[] }).workers.length === 2;
        },
        20_000,
      );

      // The console is for people: normal events at info, one readable line each, no JSON.
      await waitFor(
        'both workers to say they are ready',
        () => (output.match(/^\d\d:\d\d:\d\d {2}INFO {3}worker \d+ {2}worker ready {2}worker=\S+( .*)?$/gm) ?? []).length === 2,
        20_000,
      );
      assert.doesNotMatch(output, /^\{/m);
      for (const pid of childPids(child.pid!)) {
        assert.doesNotMatch(readFileSync(`/proc/${pid}/cmdline`, 'utf8'), /amqp:/, `worker ${pid}'s command line holds no broker URL`);
      }

      const submitted = cli(dir.path, up.url, 'submit', 'transcode', '--input', '{"durationSeconds":1}', '--wait');
      assert.equal(submitted.status, 0, submitted.stderr + submitted.stdout);
      assert.match(submitted.stdout, /finished/);
      assert.match(submitted.stdout, /240p\.mp4/);
    });

    it('restarts a worker that dies, and the job it was running finishes on the next attempt', async () => {
      assert.ok(up);
      const workersBefore = childPids(up.child.pid!);
      assert.equal(workersBefore.length, 2);
      const submitted = cli(up.dir, up.url, 'submit', 'sleep', '--input', '{"ms":4000}');
      assert.equal(submitted.status, 0, submitted.stderr);
      const id = submitted.stdout.trim().split('\n').pop()!;
      const running = await waitFor(
        'the job to be running',
        () => {
          const status = cli(up!.dir, up!.url, 'status', id, '--json');
          const job = JSON.parse(status.stdout) as { state: string; attempts: Array<{ worker: string }> };
          return job.state === 'running' ? job : undefined;
        },
        20_000,
      );
      // Worker ids are <host>-<pid>-<random>: the pid says which process to kill.
      const victim = Number(running.attempts[0]!.worker.split('-').at(-2));
      assert.ok(workersBefore.includes(victim), `worker ${victim} is one of ${workersBefore.join(', ')}`);
      process.kill(victim, 'SIGKILL');
      await waitFor(
        'the supervisor to start a new worker',
        () => {
          const now = childPids(up!.child.pid!);
          return now.length === 2 && !now.includes(victim);
        },
        20_000,
      );
      const waited = cli(up.dir, up.url, 'status', id, '--json');
      const finalJob = await waitFor(
        'the job to finish',
        () => {
          const job = JSON.parse(cli(up!.dir, up!.url, 'status', id, '--json').stdout) as { state: string; attempt: number };
          return job.state === 'finished' ? job : undefined;
        },
        30_000,
      );
      assert.equal(waited.status, 0);
      assert.equal(finalJob.attempt, 2);
    });

    it('stops on SIGTERM: workers exit first, then planrun up, with code 0', async () => {
      assert.ok(up);
      const workers = childPids(up.child.pid!);
      const exited = new Promise<number | null>((resolve) => up!.child.once('exit', (code) => resolve(code)));
      up.child.kill('SIGTERM');
      assert.equal(await exited, 0);
      for (const pid of workers) assert.equal(await isAlive(pid), false, `worker ${pid} exited`);
    });
  });
}
