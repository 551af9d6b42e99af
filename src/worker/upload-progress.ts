const MiB = 1024 * 1024;

/**
 * Uploads of at least this many bytes (all of a job's outputs together) are reported as
 * progress; smaller ones end within a progress interval, and would only cost a control
 * message per job.
 */
export const reportedUploadBytes = 8 * MiB;

/** How far the upload of a job's outputs is, as the job's progress message says it: `uploading outputs 340/1024 MiB`. */
export function uploadProgressMessage(sentBytes: number, totalBytes: number): string {
  // Whole MiB once there are a hundred of them; below that, tenths, so a smaller upload still moves.
  const digits = totalBytes >= 100 * MiB ? 0 : 1;
  return `uploading outputs ${(sentBytes / MiB).toFixed(digits)}/${(totalBytes / MiB).toFixed(digits)} MiB`;
}
