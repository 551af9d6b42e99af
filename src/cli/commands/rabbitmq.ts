import type { Command } from 'commander';
import { collect, listOption } from '../options.js';

export interface RabbitmqPermissionsFlags {
  prefix: string;
  vhost: string;
  orchestratorUser: string;
  workerUser: string;
  workerTypes?: string[];
  app?: string[];
  tenantMap?: string;
  apply?: boolean;
}

export function registerRabbitmqCommand(program: Command): void {
  const rabbitmq = program.command('rabbitmq').description('set RabbitMQ up for planrun');
  rabbitmq
    .command('permissions')
    .description(
      'print the least-privilege RabbitMQ users of the three roles (orchestrator, worker, app) with their permission regexes, as rabbitmqctl commands; with --apply, create the users and set them',
    )
    .option('--prefix <name>', 'prefix of every queue and exchange name', 'planrun')
    .option('--vhost <name>', 'the RabbitMQ virtual host', '/')
    .option('--orchestrator-user <name>', 'the user of the orchestrator', 'planrun-orchestrator')
    .option('--worker-user <name>', 'the user of the workers', 'planrun-worker')
    .option('--worker-types <list>', 'comma-separated job types whose work queues the worker user may read (default: all)', listOption)
    .option(
      '--app <user[=tenant]>',
      'an app user, and the tenant whose results it may read (default: the user name); repeatable (default: planrun-app)',
      collect,
    )
    .option('--tenant-map <file>', 'app users and their tenants from a JSON object {"user": "tenant"} (as the orchestrator\'s --tenant-map)')
    .option(
      '--apply',
      'create the users that do not exist (password from PLANRUN_RABBITMQ_PASSWORD_<USER>, else generated and printed once) and set the permissions, with rabbitmqctl',
    )
    .action(async (flags: RabbitmqPermissionsFlags) => (await import('./rabbitmq-action.js')).runRabbitmqPermissions(flags));
}
