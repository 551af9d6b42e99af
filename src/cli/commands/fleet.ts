import type { Command } from 'commander';
import { clientFor, clientOptions, talkingToApi, type ClientFlags } from '../client-options.js';
import { formatFleetTable } from '../job-output.js';

interface FleetFlags extends ClientFlags {
  json?: boolean;
}

export function registerFleetCommand(program: Command): void {
  clientOptions(
    program
      .command('fleet')
      .description('list the workers the orchestrator heard from lately, as a table: what each runs and offers, and how busy it is')
      .option('--json', 'print the fleet as the API returns it'),
  ).action(async (flags: FleetFlags) => {
    const client = clientFor(flags);
    const fleet = await talkingToApi(flags, () => client.fleet());
    if (flags.json) {
      console.log(JSON.stringify(fleet, null, 2));
      return;
    }
    if (fleet.workers.length === 0) {
      console.log('no workers: none has sent a heartbeat lately, so queued jobs wait (start one with planrun worker, or planrun up)');
      return;
    }
    console.log(formatFleetTable(fleet.workers));
  });
}
