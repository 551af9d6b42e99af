import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { grantCommands, type RoleGrant } from './rabbitmq-roles.js';

export class RabbitmqctlError extends Error {
  override readonly name = 'RabbitmqctlError';
}

/** What `applyGrants` did for one user. */
export interface AppliedUser {
  user: string;
  /** Set when the user was created: the password, which nothing else records. */
  createdWithPassword?: string;
}

/**
 * Runs rabbitmqctl (on PATH, talking to the local node as its own CLI does). Passwords
 * go through its standard input, never its command line.
 */
export async function rabbitmqctl(args: readonly string[], input?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile('rabbitmqctl', ['-q', ...args], { timeout: 60_000 }, (error, stdout, stderr) => {
      if (!error) return resolve(stdout);
      const missing = (error as NodeJS.ErrnoException).code === 'ENOENT';
      reject(
        new RabbitmqctlError(
          missing ? 'rabbitmqctl is not on PATH: run this where RabbitMQ is installed' : `rabbitmqctl ${args[0]} failed: ${(stderr || error.message).trim()}`,
        ),
      );
    });
    child.stdin?.end(input ?? '');
  });
}

export async function listUsers(): Promise<Set<string>> {
  const listed = JSON.parse(await rabbitmqctl(['list_users', '--formatter', 'json'])) as Array<{ user: string }>;
  return new Set(listed.map(({ user }) => user));
}

/**
 * Creates each user that does not exist yet (password from `passwordFor`, else a random
 * one), then sets its permissions. An existing user keeps its password.
 */
export async function applyGrants(grants: readonly RoleGrant[], vhost: string, passwordFor: (user: string) => string | undefined): Promise<AppliedUser[]> {
  const existing = await listUsers();
  const applied: AppliedUser[] = [];
  for (const grant of grants) {
    const outcome: AppliedUser = { user: grant.user };
    if (!existing.has(grant.user)) {
      const password = passwordFor(grant.user) ?? randomBytes(24).toString('base64url');
      await rabbitmqctl(['add_user', grant.user], `${password}\n`);
      existing.add(grant.user);
      outcome.createdWithPassword = password;
    }
    for (const command of grantCommands(grant, vhost)) await rabbitmqctl(command);
    applied.push(outcome);
  }
  return applied;
}

/** Removes users (tests, and an operator undoing `--apply`); a user already gone is fine. */
export async function deleteUsers(users: readonly string[]): Promise<void> {
  const existing = await listUsers();
  for (const user of users) if (existing.has(user)) await rabbitmqctl(['delete_user', user]);
}

/** The environment variable a user's password may come from: PLANRUN_RABBITMQ_PASSWORD_<USER>, upper case, `-` as `_`. */
export function passwordVariable(user: string): string {
  return `PLANRUN_RABBITMQ_PASSWORD_${user.toUpperCase().replace(/[^A-Z0-9]/g, '_')}`;
}
