const MiB = 1024 * 1024;

/** How far the upload of a job's outputs is, as the job's progress message says it: `uploading outputs 340/1024 MiB`. */
export function uploadProgressMessage(sentBytes: number, totalBytes: number): string {
  // Whole MiB once there are ten of them; below that, tenths, so a small upload still moves.
  const digits = totalBytes >= 10 * MiB ? 0 : 1;
  return `uploading outputs ${(sentBytes / MiB).toFixed(digits)}/${(totalBytes / MiB).toFixed(digits)} MiB`;
}
