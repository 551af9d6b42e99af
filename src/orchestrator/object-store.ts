import {
  AbortMultipartUploadCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { outputNameProblem } from './store-names.js';

/**
 * The orchestrator's side of the S3-compatible output store (AWS S3, MinIO, R2, Ceph…).
 * Only the orchestrator holds the store's credentials, taken from the standard AWS
 * environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_PROFILE,
 * AWS_REGION…), never from a flag. It hands workers presigned PUT URLs for attempt-scoped
 * keys with a positive fence answer, and readers presigned GET URLs (see docs/storage.md).
 */
export interface S3StoreConfig {
  bucket: string;
  /** Key prefix, without leading or trailing slash; may be empty. */
  prefix: string;
  /** A non-AWS endpoint (MinIO, R2, a test server): `http(s)://host:port`. */
  endpoint?: string;
  /** Default: AWS_REGION, else `us-east-1`. */
  region?: string;
  /** Address the bucket in the path (`endpoint/bucket/key`) rather than the host name; needed by most non-AWS stores. */
  forcePathStyle?: boolean;
  /** Credentials for tests; production takes them from the AWS environment. */
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
}

export interface AttemptRef {
  tenant: string;
  jobId: string;
  attempt: number;
}

/** What removing one attempt's prefix took away. */
export interface RemovedAttempt {
  objects: number;
  uploads: number;
}

/** A multipart upload begun and neither completed nor aborted. */
export interface UnfinishedUpload {
  key: string;
  uploadId: string;
  initiatedAt: number;
  /** The attempt whose prefix the key is under, or undefined for a key that is no attempt's. */
  attempt: AttemptRef | undefined;
}

/** DeleteObjects takes at most this many keys per request; ListObjectsV2 answers as many per page. */
const deleteBatch = 1000;

// `<tenant>/<job>/<attempt>/<name>`: a job id is a UUID (the ledger's randomUUID), which
// finds the job's segment even when the tenant or the name holds slashes.
const attemptKeyPattern = /^(.+?)\/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\/([1-9][0-9]*)\/./;

/** One presigned upload handed to a worker with a positive fence answer. */
export interface OutputUpload {
  name: string;
  /** A presigned PUT URL; the request must send exactly `bytes` bytes (Content-Length is signed). */
  url: string;
  /** What the result names: `s3://bucket/key`. */
  location: string;
}

export class S3OutputStore {
  readonly bucket: string;
  readonly prefix: string;
  private readonly client: S3Client;

  constructor(config: S3StoreConfig) {
    this.bucket = config.bucket;
    this.prefix = config.prefix;
    this.client = new S3Client({
      region: config.region ?? process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION ?? 'us-east-1',
      ...(config.endpoint ? { endpoint: config.endpoint } : {}),
      forcePathStyle: config.forcePathStyle ?? false,
      ...(config.credentials ? { credentials: config.credentials } : {}),
      // A presigned PUT must not carry a checksum of an empty body: the worker streams the file.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
  }

  /** `s3://bucket/prefix` */
  describe(): string {
    return `s3://${this.bucket}${this.prefix ? `/${this.prefix}` : ''}`;
  }

  keyOf(ref: AttemptRef, name: string): string {
    const key = `${ref.tenant}/${ref.jobId}/${ref.attempt}/${name}`;
    return this.prefix ? `${this.prefix}/${key}` : key;
  }

  locationOf(key: string): string {
    return `s3://${this.bucket}/${key}`;
  }

  /** The key of an `s3://` location in this store's bucket and prefix, or undefined for any other location. */
  keyOfLocation(location: string): string | undefined {
    const head = `s3://${this.bucket}/`;
    if (!location.startsWith(head)) return undefined;
    const key = location.slice(head.length);
    if (this.prefix && !key.startsWith(`${this.prefix}/`)) return undefined;
    return key;
  }

  /**
   * The key of an `s3://` location under `tenant`'s own keys (`<prefix>/<tenant>/…`: its
   * jobs' outputs and its uploads), or undefined for any other location. A `.` or `..`
   * segment is refused too: a URL parser would resolve it, and climb into another
   * tenant's keys.
   */
  tenantKeyOfLocation(location: string, tenant: string): string | undefined {
    const key = this.keyOfLocation(location);
    const tenantRoot = this.prefix ? `${this.prefix}/${tenant}/` : `${tenant}/`;
    if (!key?.startsWith(tenantRoot) || outputNameProblem(key.slice(tenantRoot.length)) !== undefined) return undefined;
    return key;
  }

  /** Where `POST /v1/uploads` puts a tenant's file: `<prefix>/<tenant>/uploads/<id>/<name>`. */
  uploadKeyOf(tenant: string, id: string, name: string): string {
    const key = `${tenant}/uploads/${id}/${name}`;
    return this.prefix ? `${this.prefix}/${key}` : key;
  }

  /** Where one attempt's objects are: `<prefix>/<tenant>/<job>/<attempt>/`. */
  attemptPrefix(ref: AttemptRef): string {
    return this.keyOf(ref, '');
  }

  /** The attempt a key of this store belongs to, or undefined for a key outside any attempt's prefix. */
  attemptOfKey(key: string): AttemptRef | undefined {
    const head = this.prefix ? `${this.prefix}/` : '';
    if (!key.startsWith(head)) return undefined;
    const match = attemptKeyPattern.exec(key.slice(head.length));
    return match ? { tenant: match[1]!, jobId: match[2]!, attempt: Number(match[3]) } : undefined;
  }

  /**
   * Removes every object under the attempt's prefix (ListObjectsV2, DeleteObjects) and
   * aborts the multipart uploads left unfinished there; answers how many of each. Removing
   * what is already gone is no error, so two cleaners may remove the same attempt.
   */
  async removeAttempt(ref: AttemptRef): Promise<RemovedAttempt> {
    const prefix = this.attemptPrefix(ref);
    let objects = 0;
    let token: string | undefined;
    do {
      const page = await this.client.send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix: prefix, MaxKeys: deleteBatch, ContinuationToken: token }));
      const keys = (page.Contents ?? []).flatMap((object) => (object.Key === undefined ? [] : [{ Key: object.Key }]));
      if (keys.length > 0) {
        const answer = await this.client.send(new DeleteObjectsCommand({ Bucket: this.bucket, Delete: { Objects: keys, Quiet: true } }));
        const failed = (answer.Errors ?? []).filter((e) => e.Code !== 'NoSuchKey');
        if (failed.length > 0) {
          const first = failed[0]!;
          throw new Error(`the store refused to delete ${failed.length} objects under ${prefix} (${first.Key}: ${first.Code} ${first.Message})`);
        }
        objects += keys.length - (answer.Errors?.length ?? 0);
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token !== undefined);
    let uploads = 0;
    for await (const upload of this.unfinishedUploads(prefix)) {
      if (await this.abortUpload(upload)) uploads += 1;
    }
    return { objects, uploads };
  }

  /** The multipart uploads begun under `prefix` (default: the store's own) and neither completed nor aborted. */
  async *unfinishedUploads(prefix = this.prefix ? `${this.prefix}/` : ''): AsyncGenerator<UnfinishedUpload> {
    let keyMarker: string | undefined;
    let uploadIdMarker: string | undefined;
    for (;;) {
      const page = await this.client.send(
        new ListMultipartUploadsCommand({ Bucket: this.bucket, Prefix: prefix, KeyMarker: keyMarker, UploadIdMarker: uploadIdMarker }),
      );
      for (const upload of page.Uploads ?? []) {
        if (upload.Key === undefined || upload.UploadId === undefined) continue;
        yield { key: upload.Key, uploadId: upload.UploadId, initiatedAt: upload.Initiated?.getTime() ?? 0, attempt: this.attemptOfKey(upload.Key) };
      }
      if (!page.IsTruncated) return;
      keyMarker = page.NextKeyMarker;
      uploadIdMarker = page.NextUploadIdMarker;
    }
  }

  /** Aborts a multipart upload (its parts are freed); false when it was already gone (completed, or aborted by another cleaner). */
  async abortUpload(upload: Pick<UnfinishedUpload, 'key' | 'uploadId'>): Promise<boolean> {
    try {
      await this.client.send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: upload.key, UploadId: upload.uploadId }));
      return true;
    } catch (error) {
      if (error instanceof S3ServiceException && error.name === 'NoSuchUpload') return false;
      throw error;
    }
  }

  /** Presigned PUTs for one attempt's outputs, valid for `expiresInMs` (at least one second). */
  async presignUploads(ref: AttemptRef, outputs: ReadonlyArray<{ name: string; bytes: number }>, expiresInMs: number): Promise<OutputUpload[]> {
    return Promise.all(
      outputs.map(async ({ name, bytes }) => {
        const key = this.keyOf(ref, name);
        return { name, url: await this.presignUpload(key, bytes, expiresInMs), location: this.locationOf(key) };
      }),
    );
  }

  /** A presigned PUT of exactly `bytes` bytes (Content-Length is signed) to `key`, valid for `expiresInMs` (at least one second). */
  presignUpload(key: string, bytes: number, expiresInMs: number): Promise<string> {
    return getSignedUrl(this.client, new PutObjectCommand({ Bucket: this.bucket, Key: key, ContentLength: bytes }), {
      expiresIn: Math.max(1, Math.ceil(expiresInMs / 1000)),
    });
  }

  /** A short-lived presigned GET for a key (readers of `GET /v1/jobs/:id/outputs/:name`, workers fetching inputs). */
  presignDownload(key: string, expiresInMs: number, fileName?: string): Promise<string> {
    return getSignedUrl(
      this.client,
      new GetObjectCommand({
        Bucket: this.bucket,
        Key: key,
        ...(fileName ? { ResponseContentDisposition: `attachment; filename="${fileName.replace(/["\\]/g, '_')}"` } : {}),
      }),
      { expiresIn: Math.max(1, Math.ceil(expiresInMs / 1000)) },
    );
  }

  close(): void {
    this.client.destroy();
  }
}
