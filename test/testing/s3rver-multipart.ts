/**
 * What s3rver 3.7 lacks of S3's multipart API, added in front of its router so that the
 * orchestrator's real SDK calls work against it: ListMultipartUploads (`GET /bucket?uploads`),
 * AbortMultipartUpload (`DELETE /bucket/key?uploadId=`), and S3's `NoSuchUpload` (404) for a
 * part or a complete of an upload that does not exist or was aborted (s3rver would quietly
 * make the upload's folder again, or fail with a 500). It works on s3rver's own folder
 * layout: `<directory>/<bucket>/._S3rver_uploads/<uploadId>/key`.
 *
 * Requests must be signed with the test credential (the Authorization header names it);
 * the signature itself is not checked here.
 */
import { existsSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';

interface KoaContext {
  method: string;
  path: string;
  query: Record<string, string | string[] | undefined>;
  headers: Record<string, string | string[] | undefined>;
  status: number;
  type: string;
  body: unknown;
}
type Middleware = (ctx: KoaContext, next: () => Promise<void>) => Promise<void>;

export function addMultipartBookkeeping(server: { middleware: Middleware[] }, directory: string, accessKeyId: string): void {
  const uploadsOf = (bucket: string) => join(directory, bucket, '._S3rver_uploads');
  // An upload's folder can go (completed, or aborted by a request running at the same time)
  // between any two of these reads: gone is "no such upload", never a 500.
  const keyOf = (bucket: string, uploadId: string): string | undefined => {
    try {
      return readFileSync(join(uploadsOf(bucket), uploadId, 'key'), 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  };
  const initiatedAt = (bucket: string, uploadId: string): Date | undefined => {
    try {
      return statSync(join(uploadsOf(bucket), uploadId)).birthtime;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  };
  const error = (ctx: KoaContext, status: number, code: string, message: string) => {
    ctx.status = status;
    ctx.type = 'application/xml';
    ctx.body = `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${message}</Message></Error>`;
  };

  const multipart: Middleware = async (ctx, next) => {
    const [, bucket, ...keyParts] = ctx.path.split('/').map(decodeURIComponent);
    const key = keyParts.join('/');
    const uploadId = typeof ctx.query.uploadId === 'string' ? ctx.query.uploadId : undefined;
    const listing = ctx.method === 'GET' && bucket && !key && 'uploads' in ctx.query;
    const aborting = ctx.method === 'DELETE' && bucket && key && uploadId !== undefined;
    const continuing = (ctx.method === 'PUT' || ctx.method === 'POST') && bucket && key && uploadId !== undefined;
    if (!listing && !aborting && !continuing) return next();

    const authorization = String(ctx.headers.authorization ?? ctx.query['X-Amz-Credential'] ?? '');
    if (!authorization.includes(`${accessKeyId}/`)) return error(ctx, 403, 'AccessDenied', 'Access Denied');

    if (listing) {
      const prefix = typeof ctx.query.prefix === 'string' ? ctx.query.prefix : '';
      const root = uploadsOf(bucket);
      const uploads = existsSync(root)
        ? readdirSync(root)
            .map((id) => ({ id, key: keyOf(bucket, id), initiated: initiatedAt(bucket, id) }))
            .filter(
              (upload): upload is { id: string; key: string; initiated: Date } =>
                upload.key !== undefined && upload.initiated !== undefined && upload.key.startsWith(prefix),
            )
            .sort((a, b) => a.key.localeCompare(b.key))
        : [];
      ctx.status = 200;
      ctx.type = 'application/xml';
      ctx.body =
        `<?xml version="1.0" encoding="UTF-8"?>\n<ListMultipartUploadsResult><Bucket>${xml(bucket)}</Bucket><Prefix>${xml(prefix)}</Prefix><IsTruncated>false</IsTruncated>` +
        uploads
          .map((u) => `<Upload><Key>${xml(u.key)}</Key><UploadId>${u.id}</UploadId><Initiated>${u.initiated.toISOString()}</Initiated></Upload>`)
          .join('') +
        `</ListMultipartUploadsResult>`;
      return;
    }
    if (keyOf(bucket, uploadId!) !== key) return error(ctx, 404, 'NoSuchUpload', 'The specified upload does not exist.');
    if (continuing) return next();
    rmSync(join(uploadsOf(bucket), uploadId!), { recursive: true, force: true });
    ctx.status = 204;
    ctx.body = '';
  };
  // Before the router, which is the last of s3rver's middleware.
  server.middleware.splice(server.middleware.length - 1, 0, multipart);
}

function xml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}
