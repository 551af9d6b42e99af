import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import type { PresignedPart, PresignedUpload } from '../control/protocol.js';
import { outputNameProblem } from './store-names.js';
import { checkedPartSize, defaultPartSize, planParts } from './upload-parts.js';

/**
 * The orchestrator's side of the S3-compatible output store (AWS S3, MinIO, R2, Ceph…).
 * Only the orchestrator holds the store's credentials, taken from the standard AWS
 * environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_PROFILE,
 * AWS_REGION…), never from a flag. It hands workers presigned PUT URLs for attempt-scoped
 * keys with a positive fence answer (a multipart upload with a URL per part for a file
 * larger than the part size, completed here once the worker hands back the parts' ETags),
 * and readers presigned GET URLs (see docs/storage.md).
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
  /** An output larger than this goes up as a multipart upload in parts of this size (default 64 MiB, at least 5 MiB; see upload-parts.ts). */
  partSize?: number;
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

/** The store could not be reached, or refused a request the orchestrator made to it (create, complete, abort). */
export class ObjectStoreError extends Error {
  override readonly name = 'ObjectStoreError';
}

export class S3OutputStore {
  readonly bucket: string;
  readonly prefix: string;
  readonly partSize: number;
  private readonly client: S3Client;

  constructor(config: S3StoreConfig) {
    this.bucket = config.bucket;
    this.prefix = config.prefix;
    this.partSize = checkedPartSize(config.partSize ?? defaultPartSize);
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

  /**
   * The uploads of one attempt's outputs, every URL valid for `expiresInMs` (at least one
   * second): a presigned PUT for a file of at most the part size (its length signed in);
   * for a larger one, a multipart upload created now, with a presigned UploadPart URL per part.
   */
  async presignUploads(ref: AttemptRef, outputs: ReadonlyArray<{ name: string; bytes: number }>, expiresInMs: number): Promise<PresignedUpload[]> {
    const expiresIn = Math.max(1, Math.ceil(expiresInMs / 1000));
    return Promise.all(
      outputs.map(async ({ name, bytes }): Promise<PresignedUpload> => {
        const key = this.keyOf(ref, name);
        const location = this.locationOf(key);
        if (bytes <= this.partSize) {
          return { name, location, url: await this.presignUpload(key, bytes, expiresInMs) };
        }
        const uploadId = await this.createMultipartUpload(key);
        const parts = await this.presignParts(key, uploadId, planParts(bytes, this.partSize), expiresIn);
        return { name, location, multipart: { uploadId, parts, validForMs: expiresInMs } };
      }),
    );
  }

  /** A presigned PUT of exactly `bytes` bytes (Content-Length is signed) to `key`, valid for `expiresInMs` (at least one second). */
  presignUpload(key: string, bytes: number, expiresInMs: number): Promise<string> {
    return getSignedUrl(this.client, new PutObjectCommand({ Bucket: this.bucket, Key: key, ContentLength: bytes }), {
      expiresIn: Math.max(1, Math.ceil(expiresInMs / 1000)),
    });
  }

  /** Fresh presigned UploadPart URLs for parts of an upload already started, valid for `expiresInMs` (at least one second). */
  renewParts(ref: AttemptRef, name: string, uploadId: string, parts: ReadonlyArray<Omit<PresignedPart, 'url'>>, expiresInMs: number): Promise<PresignedPart[]> {
    return this.presignParts(this.keyOf(ref, name), uploadId, parts, Math.max(1, Math.ceil(expiresInMs / 1000)));
  }

  private presignParts(key: string, uploadId: string, parts: ReadonlyArray<Omit<PresignedPart, 'url'>>, expiresIn: number): Promise<PresignedPart[]> {
    return Promise.all(
      parts.map(async ({ partNumber, start, end }) => {
        const command = new UploadPartCommand({ Bucket: this.bucket, Key: key, UploadId: uploadId, PartNumber: partNumber, ContentLength: end - start + 1 });
        return { partNumber, url: await getSignedUrl(this.client, command, { expiresIn }), start, end };
      }),
    );
  }

  /** Assembles a multipart upload from its parts: the object becomes visible only now. */
  async completeUpload(ref: AttemptRef, name: string, uploadId: string, parts: ReadonlyArray<{ partNumber: number; etag: string }>): Promise<void> {
    const command = new CompleteMultipartUploadCommand({
      Bucket: this.bucket,
      Key: this.keyOf(ref, name),
      UploadId: uploadId,
      MultipartUpload: {
        Parts: [...parts].sort((a, b) => a.partNumber - b.partNumber).map(({ partNumber, etag }) => ({ PartNumber: partNumber, ETag: etag })),
      },
    });
    await this.send(() => this.client.send(command), `complete the upload of ${name}`);
  }

  /** Drops one attempt's multipart upload of an output and the parts uploaded so far: nothing of it becomes visible. */
  async abortOutputUpload(ref: AttemptRef, name: string, uploadId: string): Promise<void> {
    await this.send(() => this.abortUpload({ key: this.keyOf(ref, name), uploadId }), `abort the upload of ${name}`);
  }

  private async createMultipartUpload(key: string): Promise<string> {
    const command = new CreateMultipartUploadCommand({ Bucket: this.bucket, Key: key });
    const created = await this.send(() => this.client.send(command), `start a multipart upload of ${key}`);
    if (!created.UploadId) throw new ObjectStoreError(`the object store started a multipart upload of ${key} without an upload id`);
    return created.UploadId;
  }

  private async send<Output>(request: () => Promise<Output>, what: string): Promise<Output> {
    try {
      return await request();
    } catch (error) {
      throw new ObjectStoreError(`the object store at ${this.describe()} did not ${what}: ${(error as Error).name}: ${(error as Error).message}`);
    }
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
