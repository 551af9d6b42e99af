/**
 * The wire shape of the fleet, declared once: what `GET /v1/fleet` answers (serialised
 * through the schema here) and what the client types it as. Times are ISO 8601 strings.
 */
import { allRequired, timeSchema, type SchemaProperties } from './schema.js';

/** A job type a worker has but does not offer, with the capabilities it lacks for it. */
export interface HeldBackJobType {
  type: string;
  missing: string[];
}

export interface FleetWorker {
  id: string;
  jobTypes: string[];
  capabilities: string[];
  /** Job types it has but does not offer, each with the capabilities it lacks for it. */
  heldBack: HeldBackJobType[];
  /** Jobs it runs at once. */
  slots: number;
  /** Jobs it ran at its last heartbeat. */
  running: number;
  lastHeartbeat: string;
}

/** The workers heard from within the fleet window. */
export interface FleetView {
  workers: FleetWorker[];
}

const heldBackProperties = {
  type: { type: 'string' },
  missing: { type: 'array', items: { type: 'string' } },
} as const satisfies SchemaProperties<HeldBackJobType>;

const fleetWorkerProperties = {
  id: { type: 'string' },
  jobTypes: { type: 'array', items: { type: 'string' } },
  capabilities: { type: 'array', items: { type: 'string' } },
  heldBack: {
    type: 'array',
    description: 'job types it has but does not offer, each with the capabilities it lacks for it',
    items: { type: 'object', required: allRequired(heldBackProperties), properties: heldBackProperties },
  },
  slots: { type: 'integer', description: 'jobs it runs at once' },
  running: { type: 'integer', description: 'jobs it ran at its last heartbeat' },
  lastHeartbeat: timeSchema,
} as const satisfies SchemaProperties<FleetWorker>;

export const fleetWorkerSchema = { type: 'object', required: allRequired(fleetWorkerProperties), properties: fleetWorkerProperties } as const;

const fleetViewProperties = { workers: { type: 'array', items: fleetWorkerSchema } } as const satisfies SchemaProperties<FleetView>;

export const fleetViewSchema = { type: 'object', required: allRequired(fleetViewProperties), properties: fleetViewProperties } as const;
