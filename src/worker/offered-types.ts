import type { HeldBackType } from '../control/protocol.js';
import type { JobType } from './runner/job-type.js';

/**
 * Which of its job types a worker offers (consumes, and reports to the fleet): those whose
 * `requires` its capabilities meet. It holds back the others, and reports them with the
 * capabilities it lacks, so that a job of such a type fails naming what is missing.
 */
export function offeredTypes(jobTypes: readonly JobType[], capabilities: readonly string[]): { offered: JobType[]; heldBack: HeldBackType[] } {
  const offered: JobType[] = [];
  const heldBack: HeldBackType[] = [];
  for (const jobType of jobTypes) {
    const missing = (jobType.requires ?? []).filter((capability) => !capabilities.includes(capability));
    if (missing.length === 0) offered.push(jobType);
    else heldBack.push({ type: jobType.name, missing });
  }
  return { offered, heldBack };
}
