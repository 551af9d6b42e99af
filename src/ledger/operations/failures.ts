/**
 * The holding area (issue 14): the failed jobs nobody retried yet, one line per (type,
 * error code), so that 3,000 jobs failed the same way by one bad deploy are one line.
 * Jobs that were retried left it (the job made from them is where to look); jobs failed
 * as cancelled were never in it: someone meant them to stop.
 */
import type { FailureGroup, FailureGroupParams } from '../ledger.js';
import { validateFailedJobFilter } from '../shared/input-validation.js';
import { run, type Plan } from './plan.js';

export function* listFailureGroups(params: FailureGroupParams): Plan<FailureGroup[]> {
  const { tenant, endedAfter, endedBefore } = params;
  return yield* run('selectFailureGroups', {
    filter: validateFailedJobFilter({
      ...(tenant === undefined ? {} : { tenant }),
      ...(endedAfter === undefined ? {} : { endedAfter }),
      ...(endedBefore === undefined ? {} : { endedBefore }),
    }),
  });
}
