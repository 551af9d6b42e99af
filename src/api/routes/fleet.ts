import type { FastifyInstance } from 'fastify';
import type { Fleet } from '../../orchestrator/fleet.js';
import { fleetViewSchema, type FleetView } from '../../wire/fleet.js';
import { errorSchema } from '../errors.js';
import { isoTime } from '../job-view.js';

/**
 * `GET /v1/fleet`: the workers heard from within the fleet window. The fleet serves every
 * tenant, so every tenant sees it; it holds no job.
 */
export function registerFleetRoutes(scope: FastifyInstance, fleet: Fleet): void {
  scope.get(
    '/fleet',
    {
      schema: {
        summary: 'The workers heard from lately',
        tags: ['fleet'],
        response: {
          200: fleetViewSchema,
          401: errorSchema,
        },
      },
    },
    async (): Promise<FleetView> => ({
      workers: fleet.list().map((member) => ({
        id: member.worker,
        jobTypes: member.jobTypes,
        capabilities: member.capabilities,
        heldBack: member.heldBack ?? [],
        slots: member.slots,
        running: member.running,
        lastHeartbeat: isoTime(member.lastHeartbeat),
      })),
    }),
  );
}
