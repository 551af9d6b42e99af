/**
 * Large outputs through an S3 store, with real processes on RabbitMQ: `planrun orchestrator
 * --store … --store-part-size 5MiB` (the only process with the store's credentials) and a
 * `planrun worker` with folders of its own. An output over the part size goes up as a
 * multipart upload, part after part from disk; the stored object has the file's bytes and
 * sha256; a 1 GiB output leaves the worker's memory nearly where it was, and its upload
 * shows in the job's progress message.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { GetObjectCommand, ListMultipartUploadsCommand, S3Client } from '@aws-sdk/client-s3';
import { freePort } from '../../test/testing/free-port.js';
import { startS3Server, testS3Credentials, type TestS3Server } from '../../test/testing/s3-server.js';
import { rabbitMqUrl } from '../../test/testing/services.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { waitFor } from '../../test/testing/wait.js';
import { cliPath, startPlanrunProcess, type WorkerProcess } from '../../test/testing/worker-process.js';
import { bigOutputChunk, bigOutputFile } from '../../test/worker/fixtures/big-output-jobs.js';
import { Client } from '../client/client.js';
import type { JobView } from '../client/types.js';

const MiB = 1024 * 1024;
const bigOutputJobsModule = new URL('../../test/worker/fixtures/big-output-jobs.js', import.meta.url).pathname;

/** The sha256 of the file `big-output` writes for `bytes`, made the same way, a MiB at a time. */
function expectedSha256(bytes: number): string {
  const hash = createHash('sha256');
  for (let index = 0; index * MiB < bytes; index++) hash.update(bigOutputChunk(index, Math.min(MiB, bytes - index * MiB)));
  return hash.digest('hex');
}

/** Resident memory of a process, and its peak so far, in bytes (Linux /proc). */
function memoryOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kB = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)![1]) * 1024;
  return { rss: kB('VmRSS'), peak: kB('VmHWM') };
}

function withoutAws(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(env).filter(([name]) => !name.startsWith('AWS_')));
}

describe('large outputs through an S3 store, on RabbitMQ', () => {
  const orchestratorDir = tempDir('planrun-orch-');
  const workerDir = tempDir('planrun-worker-');
  const processes: WorkerProcess[] = [];
  let s3: TestS3Server;
  let reader: S3Client;
  let client: Client;
  let worker: WorkerProcess;

  before(async () => {
    s3 = await startS3Server();
    reader = new S3Client({ endpoint: s3.endpoint, forcePathStyle: true, region: 'us-east-1', credentials: testS3Credentials });
    const dataDir = join(orchestratorDir.path, 'data');
    const key = spawnSync(process.execPath, [cliPath, 'keys', 'create', '--tenant', 'acme', '--data-dir', dataDir], { encoding: 'utf8' })
      .stdout.trim()
      .split('\n')
      .pop()!;
    const port = await freePort();
    const prefix = `multipart${port}`;
    const orchestrator = await startPlanrunProcess(
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
        '60s',
        '--store',
        `s3://${s3.bucket}/big`,
        '--store-endpoint',
        s3.endpoint,
        '--store-path-style',
        '--store-part-size',
        '5MiB',
      ],
      'orchestrator ready',
      { ...withoutAws(process.env), ...s3.env },
    );
    processes.push(orchestrator);
    worker = await startPlanrunProcess(
      [
        'worker',
        '--amqp',
        rabbitMqUrl,
        '--prefix',
        prefix,
        '--jobs',
        bigOutputJobsModule,
        '--heartbeat-interval',
        '2s',
        '--output-dir',
        join(workerDir.path, 'outputs'),
        '--scratch-dir',
        join(workerDir.path, 'scratch'),
      ],
      '"msg":"worker ready"',
      withoutAws(process.env),
    );
    processes.push(worker);
    client = new Client({ url: `http://127.0.0.1:${port}`, key });
  });

  after(async () => {
    for (const { child } of processes) if (child.exitCode === null) child.kill('SIGKILL');
    reader.destroy();
    await s3.stop();
    orchestratorDir.remove();
    workerDir.remove();
  });

  async function storedSha256(key: string): Promise<{ bytes: number; sha256: string }> {
    const object = await reader.send(new GetObjectCommand({ Bucket: s3.bucket, Key: key }));
    const hash = createHash('sha256');
    let bytes = 0;
    for await (const chunk of object.Body as AsyncIterable<Buffer>) {
      hash.update(chunk);
      bytes += chunk.length;
    }
    return { bytes, sha256: hash.digest('hex') };
  }

  it('an output of a few parts is stored whole: the object’s bytes and sha256 are the file’s', async () => {
    const bytes = 12 * MiB + 5;
    const { id } = await client.submit('big-output', { bytes });
    const job = await client.wait(id, { timeoutMs: 60_000 });
    assert.equal(job.state, 'finished', JSON.stringify(job));
    const key = `big/acme/${id}/1/${bigOutputFile}`;
    assert.equal(job.result?.outputs?.[bigOutputFile], `s3://${s3.bucket}/${key}`);
    assert.deepEqual(await storedSha256(key), { bytes, sha256: expectedSha256(bytes) });
    const pending = await reader.send(new ListMultipartUploadsCommand({ Bucket: s3.bucket, Prefix: 'big/' }));
    assert.deepEqual(pending.Uploads ?? [], [], 'the upload was completed, not left pending');
  });

  it('a 1 GiB output streams as a multipart upload with the worker’s memory bounded, its progress shown, its sha256 right', async () => {
    const bytes = 1024 * MiB;
    const pid = worker.child.pid!;
    const before = memoryOf(pid);
    const { id } = await client.submit('big-output', { bytes });
    const key = `big/acme/${id}/1/${bigOutputFile}`;
    // While it runs: the job's progress messages, and whether the store holds a multipart upload of its key.
    const messages = new Set<string>();
    let sawMultipart = false;
    let job: JobView | undefined;
    await waitFor(
      'the 1 GiB job to end',
      async () => {
        job = await client.get(id);
        if (job.progressMessage) messages.add(job.progressMessage);
        if (!sawMultipart) {
          const pending = await reader.send(new ListMultipartUploadsCommand({ Bucket: s3.bucket, Prefix: key }));
          sawMultipart = (pending.Uploads ?? []).some((upload) => upload.Key === key);
        }
        return job.state !== 'queued' && job.state !== 'running';
      },
      240_000,
      200,
    );
    const after = memoryOf(pid);
    assert.equal(job?.state, 'finished', JSON.stringify(job));
    assert.equal(job.result?.outputs?.[bigOutputFile], `s3://${s3.bucket}/${key}`);
    const growth = after.peak - before.rss;
    console.log(
      `worker RSS before ${(before.rss / MiB).toFixed(0)} MiB, peak after ${(after.peak / MiB).toFixed(0)} MiB: growth ${(growth / MiB).toFixed(0)} MiB for a 1024 MiB output`,
    );
    assert.ok(growth < 200 * MiB, `the worker's memory grew by ${(growth / MiB).toFixed(0)} MiB`);
    assert.ok(sawMultipart, 'the output went up as a multipart upload');
    const uploading = [...messages].filter((message) => /^uploading outputs \d+\/1024 MiB$/.test(message));
    assert.ok(uploading.length > 0, `progress messages seen: ${JSON.stringify([...messages])}`);
    assert.deepEqual(await storedSha256(key), { bytes, sha256: expectedSha256(bytes) });
  });
});
