/**
 * An S3-protocol server for tests: the npm package s3rver, serving the real S3 HTTP API
 * from a temp folder, in this process, on a free port of 127.0.0.1. Nothing global: each
 * test starts its own and stops it.
 *
 * s3rver 3.7 creates, fills and completes multipart uploads but answers NotImplemented to
 * the two calls that find and end unfinished ones; this harness serves those two
 * (ListMultipartUploads, AbortMultipartUpload) from s3rver's own upload folders, in S3's
 * XML, so that the store cleaner talks to it as to S3. Their signatures are not checked.
 */
import { existsSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { S3OutputStore } from '../../src/orchestrator/object-store.js';
import { tempDir } from './temp-dir.js';

/** The few parts of a Koa context the multipart calls use. */
interface KoaContext {
  method: string;
  path: string;
  query: Record<string, string | string[] | undefined>;
  status: number;
  type: string;
  body: unknown;
}
type KoaMiddleware = (ctx: KoaContext, next: () => Promise<void>) => Promise<void>;

interface S3rverInstance {
  run(): Promise<{ address: string; port: number }>;
  close(): Promise<void>;
  /** Koa's middleware stack, in the order it runs. */
  middleware: KoaMiddleware[];
  store: { getResourcePath(bucket: string, key: string | undefined, resource: string): string };
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
  store(prefix?: string): S3OutputStore;
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
  server.middleware.unshift(multipartListing(server));
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
    store: (prefix = 'outputs') => {
      const store = new S3OutputStore({ bucket, prefix, endpoint, forcePathStyle: true, region: 'us-east-1', credentials: testS3Credentials });
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

/** ListMultipartUploads (`GET /bucket?uploads`) and AbortMultipartUpload (`DELETE /bucket/key?uploadId=`), path-style. */
function multipartListing(server: S3rverInstance): KoaMiddleware {
  const uploadsOf = (bucket: string) => {
    const dir = server.store.getResourcePath(bucket, undefined, 'uploads');
    if (!existsSync(dir)) return [];
    return readdirSync(dir).flatMap((id) => {
      try {
        const keyFile = join(dir, id, 'key');
        return [{ id, dir: join(dir, id), key: readFileSync(keyFile, 'utf8'), initiated: statSync(keyFile).mtime }];
      } catch (error) {
        // Completed or aborted (by a request running at the same time) since the folder was read.
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
        throw error;
      }
    });
  };
  return async (ctx, next) => {
    const [, bucket, ...rest] = ctx.path.split('/');
    const key = rest.map(decodeURIComponent).join('/');
    if (ctx.method === 'GET' && bucket && key === '' && 'uploads' in ctx.query) {
      const prefix = typeof ctx.query.prefix === 'string' ? ctx.query.prefix : '';
      const uploads = uploadsOf(bucket)
        .filter((u) => u.key.startsWith(prefix))
        .sort((a, b) => a.key.localeCompare(b.key));
      ctx.type = 'application/xml';
      ctx.body =
        `<?xml version="1.0" encoding="UTF-8"?><ListMultipartUploadsResult><Bucket>${xml(bucket)}</Bucket><Prefix>${xml(prefix)}</Prefix>` +
        `<IsTruncated>false</IsTruncated>` +
        uploads
          .map((u) => `<Upload><Key>${xml(u.key)}</Key><UploadId>${u.id}</UploadId><Initiated>${u.initiated.toISOString()}</Initiated></Upload>`)
          .join('') +
        `</ListMultipartUploadsResult>`;
      return;
    }
    if (ctx.method === 'DELETE' && bucket && key !== '' && typeof ctx.query.uploadId === 'string') {
      const upload = uploadsOf(bucket).find((u) => u.id === ctx.query.uploadId && u.key === key);
      if (!upload) {
        ctx.status = 404;
        ctx.type = 'application/xml';
        ctx.body = '<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchUpload</Code><Message>The specified upload does not exist.</Message></Error>';
        return;
      }
      rmSync(upload.dir, { recursive: true, force: true });
      ctx.status = 204;
      return;
    }
    await next();
  };
}

function xml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}
