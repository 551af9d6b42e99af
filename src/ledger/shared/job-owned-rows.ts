/**
 * Every table that holds rows of one job, and the column naming it: what the retention
 * pass deletes with the job (both drivers' `deleteJobs` read this list, so a table added
 * here is pruned with its job on both databases). The job's own
 * row goes last, after everything that names it.
 */
export const jobOwnedRows: ReadonlyArray<{ table: string; column: string }> = [
  { table: 'attempts', column: 'job_id' },
  { table: 'outbox', column: 'job_id' },
  { table: 'upload_grants', column: 'job_id' },
  { table: 'log_chunks', column: 'job_id' },
  { table: 'attempt_logs', column: 'job_id' },
  // The link from the job a pruned job was made from; a link to a newer job that retried
  // this one stays, so that job still says which one it was made from.
  { table: 'job_retries', column: 'retry_id' },
];
