import type { Command } from 'commander';
import type { S3OutputStore } from '../orchestrator/object-store.js';
import { defaultStoreCleanupGraceMs, type StoreCleanupOptions } from '../orchestrator/store-cleaner.js';
import { parseStoreUrl } from '../orchestrator/store-names.js';
import { maxPartSize, minPartSize } from '../orchestrator/upload-parts.js';
import { bytesOption, durationFlag, formatBytes, UsageError } from './options.js';

export interface StoreFlags {
  store?: string;
  storeEndpoint?: string;
  storeRegion?: string;
  storePathStyle?: boolean;
  storeCleanupGrace?: number;
  storePartSize?: number;
}

/** The object-store flags of `planrun orchestrator` and `planrun up`. Credentials come only from the AWS environment. */
export function addStoreOptions(command: Command): Command {
  return command
    .option(
      '--store <s3://bucket/prefix>',
      'keep outputs in an S3-compatible object store (credentials from the AWS environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE…); workers get presigned upload URLs with the fence',
    )
    .option('--store-endpoint <url>', "the object store's endpoint, for MinIO, R2, Ceph… (default: AWS S3)")
    .option('--store-region <region>', "the object store's region (default: AWS_REGION, else us-east-1)")
    .option('--store-path-style', 'address the bucket in the path (endpoint/bucket/key), as most non-AWS stores need')
    .option(
      '--store-part-size <size>',
      'an output larger than this is uploaded in parts of this size, a presigned URL each (default 64MiB; 5MiB to 5GiB; grown for files over 10,000 parts)',
      bytesOption,
    )
    .addOption(
      durationFlag(
        '--store-cleanup-grace <duration>',
        'remove what attempts that lost uploaded this long after their last upload URL stopped working (default: 1h)',
      ),
    );
}

/** How the store's cleaner runs, or undefined without `--store`. */
export function storeCleanupFrom(flags: StoreFlags): StoreCleanupOptions | undefined {
  if (!flags.store) return undefined;
  return { graceMs: flags.storeCleanupGrace ?? defaultStoreCleanupGraceMs };
}

/** The store the flags name, or undefined without `--store`. The S3 client is loaded only then. */
export async function objectStoreFrom(flags: StoreFlags): Promise<S3OutputStore | undefined> {
  if (!flags.store) {
    if (flags.storeEndpoint || flags.storeRegion || flags.storePathStyle || flags.storePartSize !== undefined || flags.storeCleanupGrace !== undefined)
      throw new UsageError(
        '--store-endpoint, --store-region, --store-path-style, --store-part-size and --store-cleanup-grace go with --store s3://bucket/prefix',
      );
    return undefined;
  }
  let location;
  try {
    location = parseStoreUrl(flags.store);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  if (flags.storeEndpoint) {
    try {
      const url = new URL(flags.storeEndpoint);
      if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('not http(s)');
    } catch {
      throw new UsageError(`--store-endpoint must be an http(s) URL, not ${JSON.stringify(flags.storeEndpoint)}`);
    }
  }
  if (flags.storePartSize !== undefined && (flags.storePartSize < minPartSize || flags.storePartSize > maxPartSize)) {
    throw new UsageError(`--store-part-size must be between 5MiB and 5GiB (S3's limits), not ${formatBytes(flags.storePartSize)}`);
  }
  const { S3OutputStore } = await import('../orchestrator/object-store.js');
  return new S3OutputStore({
    ...location,
    ...(flags.storeEndpoint ? { endpoint: flags.storeEndpoint } : {}),
    ...(flags.storeRegion ? { region: flags.storeRegion } : {}),
    forcePathStyle: flags.storePathStyle ?? false,
    ...(flags.storePartSize === undefined ? {} : { partSize: flags.storePartSize }),
  });
}
