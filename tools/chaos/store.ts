/**
 * The chaos run's object store (`--store s3`): an s3rver of the run's own, which the
 * orchestrator is told of (`--store`, a short `--store-cleanup-grace`) and the runner
 * reads at the end: the outputs the results name, and whatever is left under the prefix
 * once the losing attempts' grace has passed (the `store-cleaned` invariant). It answers
 * each upload 1.5 s after storing it, as a slow store would.
 */
import { createHash } from 'node:crypto';
import { GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { defaultUploadGraceMs } from '../../src/orchestrator/control-handler.js';
import { startS3Server, testS3Credentials, type TestS3Server } from '../../test/testing/s3-server.js';

export type ChaosStoreKind = 'folder' | 's3';

/** What the run's history says of its object store (RunConfig.store). */
export interface StoreConfig {
  /** `s3://bucket/prefix`: every output location starts with it. */
  root: string;
  /** How long an upload URL outlives its lease's deadline (the orchestrator's default). */
  uploadGraceMs: number;
  /** `--store-cleanup-grace`, after which a losing attempt's objects must be gone. */
  cleanupGraceMs: number;
}

/** The content of a stored output, or undefined when there is none. */
export interface StoredContent {
  bytes: number;
  sha256: string;
}

const bucket = 'planrun-chaos';
const putAnswerDelayMs = 1500;
const prefix = 'outputs';

export class ChaosStore {
  private constructor(
    private readonly server: TestS3Server,
    private readonly client: S3Client,
    readonly config: StoreConfig,
  ) {}

  static async start(cleanupGraceMs: number): Promise<ChaosStore> {
    // A slow store: each upload is answered 1.5 s (more than a lease TTL) after it landed,
    // so that a worker killed or frozen, or an orchestrator killed, in that time leaves a
    // losing attempt's objects for the cleaner.
    const server = await startS3Server(bucket, { putAnswerDelayMs });
    const client = new S3Client({ endpoint: server.endpoint, forcePathStyle: true, region: 'us-east-1', credentials: testS3Credentials });
    return new ChaosStore(server, client, { root: `s3://${bucket}/${prefix}`, uploadGraceMs: defaultUploadGraceMs, cleanupGraceMs });
  }

  /** The orchestrator's store flags. */
  orchestratorArgs(): string[] {
    return [
      '--store',
      this.config.root,
      '--store-endpoint',
      this.server.endpoint,
      '--store-path-style',
      '--store-cleanup-grace',
      `${this.config.cleanupGraceMs}ms`,
    ];
  }

  /** The AWS environment the orchestrator takes its credentials from. */
  get env(): Record<string, string> {
    return this.server.env;
  }

  /** How long after the last upload URL was handed out every losing attempt's objects must be gone: the URL's life, the grace, a few cleaner passes. */
  settleMs(leaseTtlMs: number): number {
    return leaseTtlMs + this.config.uploadGraceMs + this.config.cleanupGraceMs + 2000;
  }

  /** Reads what an `s3://` location of this store holds. */
  async read(location: string): Promise<StoredContent | undefined> {
    const head = `s3://${bucket}/`;
    if (!location.startsWith(head)) return undefined;
    try {
      const object = await this.client.send(new GetObjectCommand({ Bucket: bucket, Key: location.slice(head.length) }));
      const body = Buffer.from(await object.Body!.transformToByteArray());
      return { bytes: body.length, sha256: createHash('sha256').update(body).digest('hex') };
    } catch (error) {
      if (error instanceof Error && error.name === 'NoSuchKey') return undefined;
      throw error;
    }
  }

  /** Every object under the prefix, as `s3://` locations. */
  async list(): Promise<Array<{ location: string; bytes: number }>> {
    const found: Array<{ location: string; bytes: number }> = [];
    let token: string | undefined;
    do {
      const page = await this.client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `${prefix}/`, ContinuationToken: token }));
      for (const object of page.Contents ?? []) found.push({ location: `s3://${bucket}/${object.Key}`, bytes: object.Size ?? 0 });
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token !== undefined);
    return found;
  }

  async stop(): Promise<void> {
    this.client.destroy();
    await this.server.stop();
  }
}
