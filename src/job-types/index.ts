import type { JobType } from '../worker/runner/job-type.js';
import { checksum } from './checksum.js';
import { sleep } from './sleep.js';
import { transcode } from './transcode.js';

/** The job types planrun ships. Like any job-types module, it default-exports the list. */
const jobTypes: JobType[] = [sleep, checksum, transcode];
export default jobTypes;
