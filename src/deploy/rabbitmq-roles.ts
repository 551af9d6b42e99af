/**
 * Least-privilege RabbitMQ users for planrun's three roles (docs/security.md, "Broker
 * users"). RabbitMQ grants per user and vhost three regular expressions over resource
 * names, queues and exchanges alike: configure (declare, delete), write (publish to an
 * exchange, bind a queue) and read (consume from a queue, bind from an exchange); and,
 * per topic exchange, regexes over routing keys (topic permissions).
 */
import type { Topology } from '../topology.js';

export type Role = 'orchestrator' | 'worker' | 'app';

/** What one broker user may do: rabbitmqctl set_permissions (and set_topic_permissions). */
export interface RoleGrant {
  role: Role;
  user: string;
  /** An app's tenant: the first word of the result routing keys it may bind to. */
  tenant?: string;
  configure: string;
  write: string;
  read: string;
  topic?: { exchange: string; write: string; read: string };
}

export interface RoleUsers {
  orchestrator: string;
  worker: string;
  /** Job types the worker user may take work of (default: every type). */
  workerTypes?: readonly string[];
  apps: ReadonlyArray<{ user: string; tenant: string }>;
}

/** The default exchange, as RabbitMQ names it in permissions: publishing through it reaches any queue. */
const defaultExchange = 'amq.default';

/**
 * The grants for each role:
 * - orchestrator: everything of the prefix, and the default exchange (work messages, dead
 *   letters, replies to direct reply-to).
 * - worker: consume its work queues, publish to the control exchange; nothing else. No
 *   configure right: the orchestrator declares the queues. Replies come through direct
 *   reply-to, which needs no permission.
 * - app: publish to the submit exchange; declare, bind and consume its own queues, named
 *   `<prefix>.app.<user>` or `<prefix>.app.<user>.<anything>`, bound to the results
 *   exchange only with its tenant's routing keys (topic permission).
 */
export function roleGrants(topology: Topology, users: RoleUsers): RoleGrant[] {
  const prefix = escapeRegExp(topology.prefix);
  const workQueues = users.workerTypes?.length
    ? `${escapeRegExp(topology.workQueue(''))}(${users.workerTypes.map(escapeRegExp).join('|')})`
    : `${escapeRegExp(topology.workQueue(''))}.+`;
  const grants: RoleGrant[] = [
    {
      role: 'orchestrator',
      user: users.orchestrator,
      configure: `^${prefix}\\..*$`,
      write: `^(${prefix}\\..*|${escapeRegExp(defaultExchange)})$`,
      read: `^${prefix}\\..*$`,
    },
    { role: 'worker', user: users.worker, configure: '^$', write: `^${escapeRegExp(topology.controlExchange)}$`, read: `^${workQueues}$` },
  ];
  for (const { user, tenant } of users.apps) {
    const own = `${escapeRegExp(appQueue(topology, user))}(\\..+)?`;
    grants.push({
      role: 'app',
      user,
      tenant,
      configure: `^${own}$`,
      write: `^(${escapeRegExp(topology.submitExchange)}|${own})$`,
      read: `^(${escapeRegExp(topology.resultsExchange)}|${own})$`,
      topic: { exchange: topology.resultsExchange, write: '^$', read: `^${escapeRegExp(tenant)}\\.` },
    });
  }
  return grants;
}

/** The queue an app user may declare for its results (and `<this>.<anything>`). */
export function appQueue(topology: Topology, user: string): string {
  return `${topology.prefix}.app.${user}`;
}

/** The rabbitmqctl commands that set a grant, as argument lists. */
export function grantCommands(grant: RoleGrant, vhost: string): string[][] {
  const commands = [['set_permissions', '-p', vhost, grant.user, grant.configure, grant.write, grant.read]];
  if (grant.topic) commands.push(['set_topic_permissions', '-p', vhost, grant.user, grant.topic.exchange, grant.topic.write, grant.topic.read]);
  return commands;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
