/**
 * A fleet with an object store, as an operator runs one: `planrun orchestrator --store`
 * (the only process holding the store's credentials) and `planrun worker` in processes of
 * their own on RabbitMQ, each with folders of its own (standing in for separate machines),
 * sharing nothing but the broker and an S3-protocol server (s3rver, started here on a free
 * port in a temp folder). The result names s3://; `planrun download` run from a third
 * folder gets the very bytes the worker stored.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { freePort } from '../../test/testing/free-port.js';
import { probeJobsModule } from '../../test/testing/harness.js';
import { startS3Server, testS3Credentials, type TestS3Server } from '../../test/testing/s3-server.js';
import { rabbitMqUrl } from '../../test/testing/services.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { waitFor } from '../../test/testing/wait.js';
import { cliPath } from '../../test/testing/worker-process.js';
import { Client } from '../client/client.js';

const fleetKey = 'fleet-key-of-the-store-test-0123456789';

function withoutAws(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(env).filter(([name]) => !name.startsWith('AWS_')));
}

function startProcess(args: string[], env: NodeJS.ProcessEnv, readyText: string): Promise<{ child: ChildProcess; output: () => string }> {
  const child = spawn(process.execPath, [cliPath, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  return waitFor(
    `planrun ${args[0]} to be ready`,
    () => {
      if (child.exitCode !== null) throw new Error(`planrun ${args[0]} exited:\n${output}`);
      return output.includes(readyText);
    },
    20_000,
  ).then(() => ({ child, output: () => output }));
}

function run(args: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  return new Promise((resolve) =>
    child.once('exit', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    }),
  );
}

describe('a fleet with an S3 store, on RabbitMQ', () => {
  const orchestratorDir = tempDir('planrun-orch-');
  const workerDir = tempDir('planrun-worker-');
  const appDir = tempDir('planrun-app-');
  const children: ChildProcess[] = [];
  let s3: TestS3Server;
  let url: string;
  let key: string;
  let otherKey: string;

  before(async () => {
    s3 = await startS3Server();
    const dataDir = join(orchestratorDir.path, 'data');
    const newKey = (tenant: string) =>
      spawnSync(process.execPath, [cliPath, 'keys', 'create', '--tenant', tenant, '--data-dir', dataDir], { encoding: 'utf8' })
        .stdout.trim()
        .split('\n')
        .pop()!;
    key = newKey('acme');
    otherKey = newKey('other');
    const port = await freePort();
    const prefix = `store${port}`;
    url = `http://127.0.0.1:${port}`;
    const base = { ...withoutAws(process.env), PLANRUN_FLEET_KEY: fleetKey, PLANRUN_LOG_LEVEL: 'info' };
    const orchestrator = await startProcess(
      [
        'orchestrator',
        '--amqp',
        rabbitMqUrl,
        '--prefix',
        prefix,
        '--data-dir',
        dataDir,
        '--port',
        String(port),
        '--lease-ttl',
        '5s',
        '--store',
        `s3://${s3.bucket}/fleet`,
        '--store-endpoint',
        s3.endpoint,
        '--store-path-style',
      ],
      { ...base, ...s3.env },
      'orchestrator ready',
    );
    children.push(orchestrator.child);
    // The worker has no storage credential, no store flag, and folders of its own.
    const worker = await startProcess(
      [
        'worker',
        '--amqp',
        rabbitMqUrl,
        '--prefix',
        prefix,
        '--jobs',
        probeJobsModule,
        '--heartbeat-interval',
        '1s',
        '--output-dir',
        join(workerDir.path, 'outputs'),
        '--scratch-dir',
        join(workerDir.path, 'scratch'),
      ],
      base,
      '"msg":"worker ready"',
    );
    children.push(worker.child);
  });

  after(async () => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
    await s3.stop();
    for (const dir of [orchestratorDir, workerDir, appDir]) dir.remove();
  });

  it('a job run on the worker is stored under s3://, downloadable by id from a third folder, and not by another tenant', async () => {
    const client = new Client({ url, key });
    const { id } = await client.submit('probe', { ms: 200, runLog: join(workerDir.path, 'runs.log') });
    const job = await client.wait(id, { timeoutMs: 30_000 });
    assert.equal(job.state, 'finished', JSON.stringify(job));
    const location = job.result?.outputs?.['probe-output.txt'];
    assert.equal(location, `s3://${s3.bucket}/fleet/acme/${id}/1/probe-output.txt`);
    assert.equal(existsSync(join(workerDir.path, 'outputs')), false, 'nothing was stored in the worker’s own folder');

    const reader = new S3Client({ endpoint: s3.endpoint, forcePathStyle: true, region: 'us-east-1', credentials: testS3Credentials });
    const object = await reader.send(new GetObjectCommand({ Bucket: s3.bucket, Key: `fleet/acme/${id}/1/probe-output.txt` }));
    const stored = Buffer.from(await object.Body!.transformToByteArray());
    reader.destroy();
    assert.match(stored.toString(), /^attempt 1 pid \d+/);

    // Not spawnSync: the store runs in this process, and must keep answering meanwhile.
    const download = await run([cliPath, 'download', id, '--out', 'got', '--url', url, '--key', key], appDir.path, withoutAws(process.env));
    assert.equal(download.status, 0, download.stderr + download.stdout);
    assert.deepEqual(readFileSync(join(appDir.path, 'got', 'probe-output.txt')), stored);
    assert.match(download.stdout, /probe-output\.txt\s+\d+ bytes\s+sha256 [0-9a-f]{64}/);

    // The route itself: a 302 to a presigned GET for the owner; another tenant's job is 404.
    const own = await fetch(client.outputUrl(id, 'probe-output.txt'), { headers: { authorization: `Bearer ${key}` }, redirect: 'manual' });
    assert.equal(own.status, 302);
    assert.match(own.headers.get('location') ?? '', /X-Amz-Signature=/);
    const other = await fetch(client.outputUrl(id, 'probe-output.txt'), { headers: { authorization: `Bearer ${otherKey}` }, redirect: 'manual' });
    assert.equal(other.status, 404);
    const missing = await fetch(client.outputUrl(id, 'nope.txt'), { headers: { authorization: `Bearer ${key}` }, redirect: 'manual' });
    assert.equal(missing.status, 404);
  });
});
