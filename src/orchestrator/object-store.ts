import { GetObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
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
