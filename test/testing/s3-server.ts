/**
 * An S3-protocol server for tests: the npm package s3rver, serving the real S3 HTTP API
 * from a temp folder, in this process, on a free port of 127.0.0.1. Nothing global: each
 * test starts its own and stops it. What s3rver lacks of the multipart API (listing and
 * aborting uploads) is added in front of it (s3rver-multipart.ts).
 */
import { createRequire } from 'node:module';
import { setTimeout as delay } from 'node:timers/promises';
import { S3OutputStore, type S3StoreConfig } from '../../src/orchestrator/object-store.js';
import { addMultipartBookkeeping } from './s3rver-multipart.js';
import { tempDir } from './temp-dir.js';

interface S3rverInstance {
  middleware: Parameters<typeof addMultipartBookkeeping>[0]['middleware'];
  run(): Promise<{ address: string; port: number }>;
  close(): Promise<void>;
}
type S3rverClass = new (options: {
  port: number;
  address: string;
  silent: boolean;
  directory: string;
  configureBuckets: Array<{ name: string }>;
}) => S3rverInstance;

const S3rver = createRequire(import.meta.url)('s3rver') as S3rverClass;

/** s3rver's fixed credentials: what the orchestrator's AWS environment holds in these tests. */
export const testS3Credentials = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };

export interface TestS3Server {
  endpoint: string;
  bucket: string;
  /** The folder s3rver keeps its objects in. */
  directory: string;
  /** An orchestrator-side store on this server, with the test credentials. */
  store(prefix?: string, options?: Pick<S3StoreConfig, 'partSize'>): S3OutputStore;
  /** The AWS environment an orchestrator process needs for this server. */
  env: Record<string, string>;
  stop(): Promise<void>;
}

export interface TestS3ServerOptions {
  /**
   * Answer each object PUT this long after the object was stored (a slow store): the
   * uploader waits, its object already visible. The chaos run uses it to widen the window
   * between an upload and the settle after it, where a kill leaves a losing attempt's objects.
   */
  putAnswerDelayMs?: number;
}

export async function startS3Server(bucket = 'planrun-test', options: TestS3ServerOptions = {}): Promise<TestS3Server> {
  const dir = tempDir('planrun-s3-');
  const server = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory: dir.path, configureBuckets: [{ name: bucket }] });
  addMultipartBookkeeping(server, dir.path, testS3Credentials.accessKeyId);
  const { putAnswerDelayMs } = options;
  if (putAnswerDelayMs) {
    server.middleware.unshift(async (ctx, next) => {
      await next();
      if (ctx.method === 'PUT' && ctx.status === 200 && !('uploadId' in ctx.query)) await delay(putAnswerDelayMs);
    });
  }
  const { port } = await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  const stores: S3OutputStore[] = [];
  return {
    endpoint,
    bucket,
    directory: dir.path,
    store: (prefix = 'outputs', options = {}) => {
      const store = new S3OutputStore({ bucket, prefix, endpoint, forcePathStyle: true, region: 'us-east-1', credentials: testS3Credentials, ...options });
      stores.push(store);
      return store;
    },
    env: { AWS_ACCESS_KEY_ID: testS3Credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: testS3Credentials.secretAccessKey, AWS_REGION: 'us-east-1' },
    stop: async () => {
      for (const store of stores) store.close();
      await server.close();
      dir.remove();
    },
  };
}
