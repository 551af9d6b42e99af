import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import type { PresignedPart, PresignedUpload } from '../control/protocol.js';
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
          const url = await getSignedUrl(this.client, new PutObjectCommand({ Bucket: this.bucket, Key: key, ContentLength: bytes }), { expiresIn });
          return { name, location, url };
        }
        const uploadId = await this.createMultipartUpload(key);
        const parts = await this.presignParts(key, uploadId, planParts(bytes, this.partSize), expiresIn);
        return { name, location, multipart: { uploadId, parts, validForMs: expiresInMs } };
      }),
    );
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

  /** Drops a multipart upload and the parts uploaded so far: nothing of it becomes visible. */
  async abortUpload(ref: AttemptRef, name: string, uploadId: string): Promise<void> {
    const command = new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: this.keyOf(ref, name), UploadId: uploadId });
    await this.send(() => this.client.send(command), `abort the upload of ${name}`);
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

  /** A short-lived presigned GET for a key (readers of `GET /v1/jobs/:id/outputs/:name`). */
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
