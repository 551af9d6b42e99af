/** The queries pages share, keyed so that one page's answer serves the others. */
import { useQuery } from '@tanstack/react-query';
import { getJson, query, type FleetView, type JobPage, type JobState } from './api.js';
import { observeFleet } from './fleet-health.js';
import { useSession } from './session.js';

/** How often lists and counts are read again while a page shows them. */
export const refreshMs = 2000;

/** The most jobs one read lists (the API's largest page): counts beyond it show as "1000+". */
export const countLimit = 1000;

export interface JobFilter {
  state?: JobState;
  type?: string;
  tenant?: string;
  cursor?: string;
  limit?: number;
}

export function useJobPage(filter: JobFilter) {
  const { key } = useSession();
  return useQuery({
    queryKey: ['jobs', filter],
    queryFn: () => getJson<JobPage>(key, `/v1/jobs${query({ ...filter })}`),
    refetchInterval: refreshMs,
  });
}

export function useFleet() {
  const { key } = useSession();
  return useQuery({
    queryKey: ['fleet'],
    queryFn: async () => {
      const fleet = await getJson<FleetView>(key, '/v1/fleet');
      observeFleet(fleet.workers);
      return fleet;
    },
    refetchInterval: refreshMs,
  });
}
