import type { FastifyInstance } from 'fastify';
import type { Fleet } from '../../orchestrator/fleet.js';
import { errorSchema } from '../errors.js';
import { isoTime } from '../job-view.js';

const workerSchema = {
  type: 'object',
  required: ['id', 'jobTypes', 'capabilities', 'heldBack', 'slots', 'running', 'lastHeartbeat'],
  properties: {
    id: { type: 'string' },
    jobTypes: { type: 'array', items: { type: 'string' } },
    capabilities: { type: 'array', items: { type: 'string' } },
    heldBack: {
      type: 'array',
      description: 'job types it has but does not offer, each with the capabilities it lacks for it',
      items: {
        type: 'object',
        required: ['type', 'missing'],
        properties: { type: { type: 'string' }, missing: { type: 'array', items: { type: 'string' } } },
      },
    },
    slots: { type: 'integer', description: 'jobs it runs at once' },
    running: { type: 'integer', description: 'jobs it ran at its last heartbeat' },
    lastHeartbeat: { type: 'string', format: 'date-time' },
  },
} as const;

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
          200: { type: 'object', required: ['workers'], properties: { workers: { type: 'array', items: workerSchema } } },
          401: errorSchema,
        },
      },
    },
    async () => ({
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
