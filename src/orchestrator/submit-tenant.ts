import { readFileSync } from 'node:fs';
import { tenantNameProblem } from '../submission/rules.js';

/**
 * Which tenant a queue submission speaks for. `body` (the default): the tenant its body
 * names, as anyone allowed to publish to the submit queue chooses. `user-id`: the tenant
 * of the broker user that published it, from the message's `user_id` property, which
 * RabbitMQ refuses unless it names the connection's own user; a tenant map says which
 * tenant each user is, else the user's name is the tenant's.
 */
export type SubmitTenantSource = { from: 'body' } | { from: 'user-id'; tenantMap?: ReadonlyMap<string, string> };

export const submitTenantSources = ['body', 'user-id'] as const;

/** The tenant a submission published by `userId` is for, or why it has none. */
export function tenantOfUser(source: Extract<SubmitTenantSource, { from: 'user-id' }>, userId: string | undefined): { tenant: string } | { problem: string } {
  if (userId === undefined || userId === '') {
    return { problem: 'the user_id property must be set (the orchestrator takes the tenant from the broker user, --submit-tenant-from user-id)' };
  }
  if (source.tenantMap) {
    const tenant = source.tenantMap.get(userId);
    return tenant === undefined ? { problem: `the broker user ${JSON.stringify(userId)} is not in the tenant map` } : { tenant };
  }
  const problem = tenantNameProblem(userId);
  return problem ? { problem: `the broker user ${JSON.stringify(userId)} cannot be a tenant: ${problem}` } : { tenant: userId };
}

/** Reads a tenant map: a JSON object from broker user names to tenant names. */
export function loadTenantMap(path: string): Map<string, string> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new TenantMapError(`tenant map ${path}: ${(error as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new TenantMapError(`tenant map ${path}: expected a JSON object from broker user to tenant, like {"acme-app": "acme"}`);
  }
  const map = new Map<string, string>();
  for (const [user, tenant] of Object.entries(parsed)) {
    if (typeof tenant !== 'string') throw new TenantMapError(`tenant map ${path}: the tenant of ${JSON.stringify(user)} must be a string`);
    const problem = tenantNameProblem(tenant);
    if (problem) throw new TenantMapError(`tenant map ${path}: the tenant of ${JSON.stringify(user)}: ${problem}`);
    map.set(user, tenant);
  }
  return map;
}

export class TenantMapError extends Error {
  override readonly name = 'TenantMapError';
}
