import { roleGrants, type RoleGrant } from '../../deploy/rabbitmq-roles.js';
import { applyGrants, passwordVariable } from '../../deploy/rabbitmqctl.js';
import { loadTenantMap, TenantMapError } from '../../orchestrator/submit-tenant.js';
import { isValidName, NAME_RULE } from '../../submission/rules.js';
import { Topology } from '../../topology.js';
import { table } from '../job-output.js';
import { UsageError } from '../options.js';
import type { RabbitmqPermissionsFlags } from './rabbitmq.js';

export async function runRabbitmqPermissions(flags: RabbitmqPermissionsFlags): Promise<void> {
  const topology = topologyFrom(flags.prefix);
  const apps = appUsers(flags);
  const grants = roleGrants(topology, {
    orchestrator: requireUserName(flags.orchestratorUser),
    worker: requireUserName(flags.workerUser),
    ...(flags.workerTypes ? { workerTypes: flags.workerTypes.map(requireTypeName) } : {}),
    apps,
  });
  console.log(`# RabbitMQ users for planrun (prefix ${topology.prefix}, vhost ${flags.vhost}); docs/security.md says what each may do`);
  console.log(
    table(
      ['role', 'user', 'configure', 'write', 'read'],
      grants.map((grant) => [grant.role, grant.user, grant.configure, grant.write, grant.read]),
    ),
  );
  for (const grant of grants.filter((g) => g.topic)) {
    console.log(`# ${grant.user} binds to ${grant.topic!.exchange} only with routing keys of tenant ${grant.tenant}: topic read ${grant.topic!.read}`);
  }
  console.log('# as rabbitmqctl commands (after rabbitmqctl add_user USER, which reads the password from its standard input):');
  for (const grant of grants) for (const line of commandLines(grant, flags.vhost)) console.log(line);
  if (!flags.apply) return;
  const applied = await applyGrants(grants, flags.vhost, (user) => process.env[passwordVariable(user)] || undefined);
  for (const { user, createdWithPassword } of applied) {
    if (createdWithPassword === undefined) console.log(`applied: ${user} existed (its password is unchanged); permissions set`);
    else console.log(`applied: created ${user}, password ${createdWithPassword} (shown this once: keep it in the URL file of its role)`);
  }
}

function commandLines(grant: RoleGrant, vhost: string): string[] {
  const quote = (arg: string) => `'${arg.replace(/'/g, `'\\''`)}'`;
  const lines = [`rabbitmqctl set_permissions -p ${quote(vhost)} ${grant.user} ${quote(grant.configure)} ${quote(grant.write)} ${quote(grant.read)}`];
  if (grant.topic) {
    lines.push(
      `rabbitmqctl set_topic_permissions -p ${quote(vhost)} ${grant.user} ${grant.topic.exchange} ${quote(grant.topic.write)} ${quote(grant.topic.read)}`,
    );
  }
  return lines;
}

function appUsers(flags: RabbitmqPermissionsFlags): Array<{ user: string; tenant: string }> {
  const apps = (flags.app ?? []).map((entry) => {
    const [user = '', tenant = user] = entry.split('=', 2);
    return { user: requireUserName(user), tenant: requireTenant(tenant) };
  });
  if (flags.tenantMap !== undefined) {
    try {
      for (const [user, tenant] of loadTenantMap(flags.tenantMap)) apps.push({ user: requireUserName(user), tenant });
    } catch (error) {
      if (error instanceof TenantMapError) throw new UsageError(error.message);
      throw error;
    }
  }
  return apps.length > 0 ? apps : [{ user: 'planrun-app', tenant: 'planrun-app' }];
}

function topologyFrom(prefix: string): Topology {
  try {
    return new Topology(prefix);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

/**
 * Names become parts of queue names, routing keys and permission regexes: the name rule
 * (no `.`, `*`, `#`) keeps one user's, tenant's or type's from covering another's.
 */
function requireName(kind: string, name: string): string {
  if (!isValidName(name)) throw new UsageError(`${kind} ${JSON.stringify(name)} ${NAME_RULE}`);
  return name;
}

const requireUserName = (name: string) => requireName('user name', name);
const requireTenant = (name: string) => requireName('tenant name', name);
const requireTypeName = (name: string) => requireName('job type', name);
