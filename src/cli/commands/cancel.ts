import type { Command } from 'commander';
import { isPlanrunApiError } from '../../client/errors.js';
import { clientFor, clientOptions, talkingToApi, type ClientFlags } from '../client-options.js';
import { ExitCode } from '../exit-codes.js';
import { attemptLabel, stateLabel } from '../job-output.js';

export function registerCancelCommand(program: Command): void {
  clientOptions(
    program
      .command('cancel')
      .description(
        'cancel a job: a queued one fails as cancelled at once, a running one is stopped by its worker at its next heartbeat ' +
          '(exit 0; 1 if it had already ended otherwise)',
      )
      .argument('<id>', 'the job id'),
  ).action((id: string, flags: ClientFlags) => cancel(id, flags));
}

async function cancel(id: string, flags: ClientFlags): Promise<void> {
  const client = clientFor(flags);
  const job = await talkingToApi(flags, async () => {
    try {
      return await client.cancel(id);
    } catch (error) {
      // 409: the job already ended; say how, from the job itself.
      if (isPlanrunApiError(error) && error.code === 'conflict') return undefined;
      throw error;
    }
  });
  if (job === undefined) {
    const ended = await talkingToApi(flags, () => client.get(id));
    if (ended.state === 'failed' && ended.reason === 'cancelled') {
      console.log(`${id} ${stateLabel(ended)}, ${attemptLabel(ended)}: it was cancelled already`);
      return;
    }
    console.log(`${id} ${stateLabel(ended)}, ${attemptLabel(ended)}`);
    console.error(`planrun: job ${id} had already ended (${stateLabel(ended)}); nothing to cancel`);
    process.exitCode = ExitCode.failed;
    return;
  }
  if (job.state === 'running') {
    console.log(
      `${id} ${stateLabel(job)}, ${attemptLabel(job)}: cancel requested; its worker stops it at its next heartbeat (follow it with: planrun watch ${id})`,
    );
    return;
  }
  console.log(`${id} ${stateLabel(job)}, ${attemptLabel(job)}`);
}
