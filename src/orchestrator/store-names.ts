/**
 * What the object store's names must be, apart from the store itself: the S3 client is
 * loaded only by an orchestrator given `--store` (src/orchestrator/object-store.ts), so
 * every other process (the CLI's commands, an orchestrator without a store) checks names
 * without loading it.
 */

/** What `--store` accepts: `s3://BUCKET` or `s3://BUCKET/PREFIX`. */
export function parseStoreUrl(url: string): { bucket: string; prefix: string } {
  const match = /^s3:\/\/([^/]+)(?:\/(.*))?$/.exec(url);
  if (!match) throw new Error(`--store must be s3://BUCKET/PREFIX, not ${JSON.stringify(url)}`);
  const bucket = match[1]!;
  const prefix = (match[2] ?? '').replace(/^\/+|\/+$/g, '');
  if (prefix.split('/').some((part) => part === '.' || part === '..')) throw new Error(`--store prefix may not contain . or .. segments: ${url}`);
  return { bucket, prefix };
}

/**
 * Checks an output name as a store key segment: a relative path of plain segments (the
 * folder store takes the same names, subfolders included), never absolute, never `..`
 * or `.`, no empty segment, no backslash or control character. Says what is wrong, or
 * nothing.
 */
export function outputNameProblem(name: string): string | undefined {
  if (name === '') return 'is an empty name';
  if (name.startsWith('/')) return 'is an absolute path';
  if (name.length > 512) return 'is longer than 512 characters';
  // eslint-disable-next-line no-control-regex
  if (/[\\\u0000-\u001f\u007f]/.test(name)) return 'contains a backslash or a control character';
  for (const segment of name.split('/')) {
    if (segment === '') return 'has an empty path segment';
    if (segment === '.' || segment === '..') return 'has a . or .. segment';
  }
  return undefined;
}
